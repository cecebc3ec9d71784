//! The HTTP ends of the bench: the receiver's servers on loopback and the load
//! generator's client.

use std::net::SocketAddr;

use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::http::{Method, Request, StatusCode, Uri};
use axum::routing::post;
use axum::serve::ListenerExt as _;
use hookbox_bench::BoxErr;
use hookbox_core::bytes::Bytes;
use hookbox_core::error_chain;
use hookbox_core::http::HeaderMap;
use http_body_util::{BodyExt as _, Full};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use tokio::runtime::Runtime;

use crate::tally::Answer;

/// The route every server answers.
pub(crate) const PATH: &str = "/webhooks/standard";

/// The load generator's client.
pub(crate) type HttpClient = Client<HttpConnector, Full<Bytes>>;

/// One request, signed ahead of time: its headers and raw body.
pub(crate) struct Prepared {
    pub(crate) headers: HeaderMap,
    pub(crate) body: Bytes,
}

/// Sends one prepared request and reads the whole answer.
pub(crate) async fn send(client: &HttpClient, uri: Uri, prepared: &Prepared) -> Answer {
    let mut request = Request::new(Full::new(prepared.body.clone()));
    *request.method_mut() = Method::POST;
    *request.uri_mut() = uri;
    *request.headers_mut() = prepared.headers.clone();
    let response = match client.request(request).await {
        Ok(response) => response,
        Err(err) => return Answer::Failed(format!("request failed: {}", error_chain(&err))),
    };
    let status = response.status();
    let body = match response.into_body().collect().await {
        Ok(body) => body.to_bytes(),
        Err(err) => return Answer::Failed(format!("reading the answer failed: {err}")),
    };
    if !status.is_success() {
        let text = String::from_utf8_lossy(&body[..body.len().min(200)]).into_owned();
        return Answer::Status(status.as_u16(), text);
    }
    if contains(&body, br#""outcome":"stored""#) {
        Answer::Stored
    } else if contains(&body, br#""outcome":"duplicate""#) {
        Answer::Duplicate
    } else {
        Answer::Ok
    }
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

/// A keep-alive HTTP/1 client; `TCP_NODELAY` as on the server, so small writes are
/// not held back by Nagle's algorithm.
pub(crate) fn http_client() -> HttpClient {
    let mut connector = HttpConnector::new();
    connector.set_nodelay(true);
    Client::builder(TokioExecutor::new()).build(connector)
}

/// A server on the receiver's runtime, stopped when dropped.
pub(crate) struct Server {
    pub(crate) uri: Uri,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Server {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Serves `router` on `127.0.0.1:0` on `rt`.
pub(crate) fn serve(rt: &Runtime, router: Router) -> Result<Server, BoxErr> {
    let listener = rt.block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))?;
    let addr: SocketAddr = listener.local_addr()?;
    let listener = listener.tap_io(|tcp| {
        // a refused option only costs latency; the bench still runs
        let _ = tcp.set_nodelay(true);
    });
    let task = rt.spawn(async move {
        if let Err(err) = axum::serve(listener, router).await {
            println!("server on {addr} stopped: {err}");
        }
    });
    Ok(Server {
        uri: format!("http://{addr}{PATH}").parse()?,
        task,
    })
}

/// The ceiling: reads the body with the edge's limit and answers 200.
pub(crate) fn bare_router(limit: usize) -> Router {
    Router::new()
        .route(PATH, post(|_body: Bytes| async { StatusCode::OK }))
        .layer(DefaultBodyLimit::max(limit))
}
