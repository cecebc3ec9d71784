//! `hookbox send`: sign a body as a provider would and POST it, like `stripe trigger`,
//! once or as several copies of one delivery (sequential retries or concurrent
//! copies), printing each answer.
#![allow(clippy::print_stdout)] // one JSON line per answer is the command's output

use std::process::ExitCode;
use std::time::Duration;

use hookbox_core::bytes::Bytes;
use hookbox_core::http::{Request, Uri};
use http_body_util::{BodyExt as _, Full};
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use serde_json::{Value, json};

use crate::UsageError;
use crate::sign::{SignArgs, Signed, sign_delivery};

pub(crate) const AFTER_HELP: &str = "\
Output: one JSON line per copy: {\"copy\":N,\"status\":CODE,\"body\":\"...\"}, or
{\"copy\":N,\"error\":\"...\"} when no answer came.

Exit status: 0 every copy got a 2xx, 1 some did not (or the secret was rejected),
2 usage error.

Example: two concurrent copies of one GitHub delivery
  hookbox send --provider github --secret \"$SECRET\" --body-file push.json \\
    --url http://127.0.0.1:3000/webhooks/github --copies 2 --concurrent";

/// The longest answer body printed per copy.
const BODY_PREVIEW: usize = 300;

/// Arguments of `hookbox send`.
#[derive(Debug, clap::Args)]
pub(crate) struct SendArgs {
    #[command(flatten)]
    sign: SignArgs,

    /// Where to POST: a plain `http://` URL (a local receiver, or a tunnel that ends TLS).
    #[arg(long)]
    url: String,

    /// How many copies of the same signed delivery to send.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=10_000))]
    copies: u32,

    /// Send the copies at the same time instead of one after another.
    #[arg(long)]
    concurrent: bool,

    /// Give up on an answer after this many seconds.
    #[arg(long, default_value_t = 10)]
    timeout: u64,
}

/// Signs once and sends `--copies` copies.
///
/// # Errors
/// [`UsageError`] for a bad URL or signing options.
pub(crate) fn run(args: &SendArgs) -> Result<ExitCode, UsageError> {
    let uri: Uri = args
        .url
        .parse()
        .map_err(|err| UsageError(format!("--url {}: {err}", args.url)))?;
    if uri.scheme_str() != Some("http") || uri.host().is_none() {
        return Err(UsageError(format!(
            "--url {}: hookbox send speaks plain http:// (for https, use `hookbox sign` headers with curl)",
            args.url
        )));
    }
    // a provider that signs the URL signs the one sent to unless --public-url says
    // which URL it would have called
    let signed = match sign_delivery(&args.sign, Some(&args.url))? {
        Ok(signed) => signed,
        Err(err) => {
            eprintln!("error: {err}");
            return Ok(ExitCode::FAILURE);
        }
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|err| UsageError(format!("cannot start the runtime: {err}")))?;
    let uri = match &signed.query {
        None => uri,
        Some(pair) => {
            let separator = if uri.query().is_some() { '&' } else { '?' };
            format!("{uri}{separator}{pair}")
                .parse()
                .map_err(|err| UsageError(format!("--url {} with {pair}: {err}", args.url)))?
        }
    };
    let answers = runtime.block_on(send_copies(
        uri,
        signed,
        args.copies,
        args.concurrent,
        Duration::from_secs(args.timeout),
    ));
    let mut all_2xx = true;
    for answer in &answers {
        all_2xx &= answer["status"]
            .as_u64()
            .is_some_and(|s| (200..300).contains(&s));
        println!("{answer}");
    }
    Ok(if all_2xx {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

async fn send_copies(
    uri: Uri,
    signed: Signed,
    copies: u32,
    concurrent: bool,
    timeout: Duration,
) -> Vec<Value> {
    let client = Client::builder(TokioExecutor::new()).build_http::<Full<Bytes>>();
    let send = |copy: u32| {
        let (client, uri, signed) = (client.clone(), uri.clone(), &signed);
        let request = build_request(uri, signed);
        async move {
            let answer = match request {
                Ok(request) => tokio::time::timeout(timeout, async {
                    let response = client.request(request).await?;
                    let status = response.status().as_u16();
                    let body = response.into_body().collect().await?.to_bytes();
                    Ok::<_, Box<dyn std::error::Error + Send + Sync>>((status, body))
                })
                .await
                .unwrap_or_else(|_| Err(format!("no answer within {timeout:?}").into())),
                Err(err) => Err(err.into()),
            };
            match answer {
                Ok((status, body)) => {
                    let text = String::from_utf8_lossy(&body);
                    let preview: String = text.chars().take(BODY_PREVIEW).collect();
                    json!({ "copy": copy, "status": status, "body": preview })
                }
                Err(err) => json!({ "copy": copy, "error": err.to_string() }),
            }
        }
    };
    if concurrent {
        let mut tasks = tokio::task::JoinSet::new();
        for copy in 1..=copies {
            tasks.spawn(send(copy));
        }
        let mut answers: Vec<Value> = tasks.join_all().await;
        answers.sort_by_key(|a| a["copy"].as_u64());
        answers
    } else {
        let mut answers = Vec::with_capacity(copies as usize);
        for copy in 1..=copies {
            answers.push(send(copy).await);
        }
        answers
    }
}

fn build_request(uri: Uri, signed: &Signed) -> Result<Request<Full<Bytes>>, String> {
    let mut request = Request::post(uri);
    // JSON unless the provider's headers say otherwise (Twilio's form bodies)
    if signed.headers.get("content-type").is_none() {
        request = request.header("content-type", "application/json");
    }
    for (name, value) in signed.headers.iter() {
        request = request.header(name, value);
    }
    request
        .body(Full::new(signed.body.clone()))
        .map_err(|err| err.to_string())
}
