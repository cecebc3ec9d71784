//! A load generator for a receiver running as its own process: `K` keep-alive HTTP/1
//! connections POST signed deliveries (Standard Webhooks by default), each with a new
//! delivery id
//! (or, with `--duplicates`, the same 16 ids again and again), for a fixed time, and
//! the acknowledgements per second and their latency are printed.
//!
//! It measures a receiver from outside, as a sender sees it: start
//! `examples/standard` (any store, with or without its worker), then point this at it.
//!
//! ```sh
//! cargo build --release -p example-standard
//! PORT=3000 ./target/release/example-standard serve --no-worker &
//! cargo run --release -p hookbox-bench --bin hookbox-bench-load -- \
//!   --url http://127.0.0.1:3000/webhooks/standard --conns 64 --seconds 10
//! ```
//!
//! Options: `--provider` (`standard`, the default, `svix`, `github` or `shopify`: the
//! providers whose delivery id is a header), `--url` (default
//! `http://127.0.0.1:3000/webhooks/<provider>`), `--secret` (default:
//! `WEBHOOK_SECRET`, else the standard example's demo secret), `--conns` (64),
//! `--seconds` (10), `--body-bytes` (1024: a JSON event padded to that size),
//! `--duplicates`, `--rate` (requests per second in all, spread over the
//! connections; default: each connection sends as fast as it is answered). Each request is signed just before it is sent, with the current
//! time; signing (an HMAC over about 1 KiB) is part of the sender's loop, not of the
//! latency, which runs from sending the request to reading the whole answer.
//!
//! Prints one line: `acked/s`, `p50`, `p99` and `max` latency in ms, and the answers
//! that were not 2xx by status (and failed requests), which a receiver under load
//! may give only as 503 with `Retry-After`. Exits 1 when any request failed or got
//! an answer other than 2xx or 503.
#![allow(clippy::print_stdout, clippy::print_stderr)] // printing the result is this binary's job

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use hookbox_bench::BoxErr;
use hookbox_core::bytes::Bytes;
use hookbox_core::http::{HeaderValue, Method, Request, Uri, header};
use hookbox_github::GitHubSigner;
use hookbox_shopify::ShopifySigner;
use hookbox_standard::StandardSigner;
use hookbox_svix::SvixSigner;
use http_body_util::{BodyExt as _, Full};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;

/// The secret `examples/standard` uses when `WEBHOOK_SECRET` is unset.
const DEMO_SECRET: &str = "whsec_aG9va2JveC1zdGFuZGFyZC1kZW1vLXNlY3JldCEh";
/// How many ids `--duplicates` sends round robin.
const DUPLICATE_IDS: usize = 16;

/// What to send, from the command line.
struct Args {
    provider: String,
    url: Uri,
    secret: String,
    conns: usize,
    seconds: u64,
    body_bytes: usize,
    duplicates: bool,
    /// Requests per second in all, when set: an offered load instead of as fast as
    /// answered.
    rate: Option<f64>,
}

impl Args {
    fn parse() -> Result<Self, BoxErr> {
        let mut url = None;
        let mut args = Self {
            provider: "standard".to_string(),
            url: Uri::from_static("/"),
            secret: std::env::var("WEBHOOK_SECRET").unwrap_or_else(|_| DEMO_SECRET.to_string()),
            conns: 64,
            seconds: 10,
            body_bytes: 1024,
            duplicates: false,
            rate: None,
        };
        let mut given = std::env::args().skip(1);
        while let Some(flag) = given.next() {
            if flag == "--duplicates" {
                args.duplicates = true;
                continue;
            }
            let value = given
                .next()
                .ok_or_else(|| format!("{flag} needs a value"))?;
            match flag.as_str() {
                "--url" => url = Some(value.parse()?),
                "--provider" => args.provider = value,
                "--secret" => args.secret = value,
                "--conns" => args.conns = value.parse::<usize>()?.max(1),
                "--seconds" => args.seconds = value.parse::<u64>()?.max(1),
                "--body-bytes" => args.body_bytes = value.parse()?,
                "--rate" => args.rate = Some(value.parse::<f64>()?).filter(|r| *r > 0.0),
                _ => return Err(format!("unknown option {flag}").into()),
            }
        }
        args.url = match url {
            Some(url) => url,
            None => format!("http://127.0.0.1:3000/webhooks/{}", args.provider).parse()?,
        };
        Ok(args)
    }
}

/// What one connection's loop saw.
#[derive(Default)]
struct Tally {
    latencies_us: Vec<u64>,
    refused: BTreeMap<u16, u64>,
    failed: u64,
    first_failure: Option<String>,
}

fn main() -> Result<(), BoxErr> {
    let args = Arc::new(Args::parse()?);
    let signer: Arc<dyn hookbox_core::Signer + Send + Sync> = match args.provider.as_str() {
        "standard" => Arc::new(StandardSigner::new(args.secret.as_str())?),
        "svix" => Arc::new(SvixSigner::new(args.secret.as_str())?),
        "github" => Arc::new(GitHubSigner::new(&args.secret)?.event("push")),
        "shopify" => Arc::new(ShopifySigner::new(&args.secret)?),
        other => {
            return Err(
                format!("--provider {other}: one of standard, svix, github, shopify").into(),
            );
        }
    };
    let body = Bytes::from(event_of(args.body_bytes));
    let run = std::process::id();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let tallies = rt.block_on(async {
        let mut connector = HttpConnector::new();
        connector.set_nodelay(true);
        let client: Client<_, Full<Bytes>> = Client::builder(TokioExecutor::new())
            .pool_max_idle_per_host(args.conns)
            .build(connector);
        let started = Instant::now();
        let deadline = started + Duration::from_secs(args.seconds);
        let loops: Vec<_> = (0..args.conns)
            .map(|conn| {
                let (client, args, signer, body) = (
                    client.clone(),
                    Arc::clone(&args),
                    Arc::clone(&signer),
                    body.clone(),
                );
                tokio::spawn(async move {
                    let mut tally = Tally::default();
                    let mut n = 0_usize;
                    // with `--rate`, each loop sends on its own schedule, its first
                    // request offset so that the loops do not send in step
                    let every = args
                        .rate
                        .map(|rate| Duration::from_secs_f64(args.conns as f64 / rate));
                    let mut due =
                        started + every.unwrap_or_default() * conn as u32 / args.conns as u32;
                    while Instant::now() < deadline {
                        if let Some(every) = every {
                            tokio::time::sleep_until(due.into()).await;
                            due += every;
                        }
                        let id = if args.duplicates {
                            format!("msg_load_{run}_dup_{}", (conn + n) % DUPLICATE_IDS)
                        } else {
                            format!("msg_load_{run}_{conn}_{n}")
                        };
                        n += 1;
                        let request = signed(&args.url, &*signer, &id, &body);
                        let started = Instant::now();
                        match send(&client, request).await {
                            Ok(status) if (200..300).contains(&status) => tally
                                .latencies_us
                                .push(started.elapsed().as_micros() as u64),
                            Ok(status) => *tally.refused.entry(status).or_default() += 1,
                            Err(err) => {
                                tally.failed += 1;
                                tally.first_failure.get_or_insert(err);
                            }
                        }
                    }
                    tally
                })
            })
            .collect();
        let mut tallies = Vec::with_capacity(loops.len());
        for handle in loops {
            tallies.push(handle.await?);
        }
        Ok::<_, BoxErr>((tallies, started.elapsed()))
    })?;
    report(&args, tallies.0, tallies.1)
}

/// Signs a delivery of `body` as `id` at the current time.
fn signed(
    url: &Uri,
    signer: &(dyn hookbox_core::Signer + Send + Sync),
    id: &str,
    body: &Bytes,
) -> Request<Full<Bytes>> {
    let now = hookbox_core::time::OffsetDateTime::now_utc().unix_timestamp();
    let mut request = Request::new(Full::new(body.clone()));
    *request.method_mut() = Method::POST;
    *request.uri_mut() = url.clone();
    let mut headers = signer.sign(id, now, body).to_header_map();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    *request.headers_mut() = headers;
    request
}

/// Sends one request and reads the whole answer; returns its status.
async fn send(
    client: &Client<HttpConnector, Full<Bytes>>,
    request: Request<Full<Bytes>>,
) -> Result<u16, String> {
    let response = client
        .request(request)
        .await
        .map_err(|err| hookbox_core::error_chain(&err))?;
    let status = response.status().as_u16();
    response
        .into_body()
        .collect()
        .await
        .map_err(|err| format!("reading the answer: {err}"))?;
    Ok(status)
}

/// Prints the run's line; an error when a request failed or got other than 2xx/503.
fn report(args: &Args, tallies: Vec<Tally>, elapsed: Duration) -> Result<(), BoxErr> {
    let mut latencies: Vec<u64> = Vec::new();
    let mut refused: BTreeMap<u16, u64> = BTreeMap::new();
    let (mut failed, mut first_failure) = (0, None);
    for tally in tallies {
        latencies.extend(tally.latencies_us);
        for (status, count) in tally.refused {
            *refused.entry(status).or_default() += count;
        }
        failed += tally.failed;
        first_failure = first_failure.or(tally.first_failure);
    }
    latencies.sort_unstable();
    let at = |q: f64| -> f64 {
        latencies
            .get(((latencies.len() as f64 * q) as usize).min(latencies.len().saturating_sub(1)))
            .map_or(0.0, |us| *us as f64 / 1000.0)
    };
    let kind = match (args.duplicates, args.rate) {
        (true, _) => format!("{} duplicates", args.provider),
        (false, Some(rate)) => format!("{} fresh at an offered {rate:.0}/s", args.provider),
        (false, None) => format!("{} fresh", args.provider),
    };
    let others: Vec<String> = refused
        .iter()
        .map(|(status, count)| format!("{count} x {status}"))
        .collect();
    println!(
        "{kind}, {} conns, {} s, {} B bodies: {:.0} acked/s, p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms; not 2xx: {}; failed: {failed}",
        args.conns,
        args.seconds,
        args.body_bytes,
        latencies.len() as f64 / elapsed.as_secs_f64(),
        at(0.50),
        at(0.99),
        latencies.last().map_or(0.0, |us| *us as f64 / 1000.0),
        if others.is_empty() {
            "none".to_string()
        } else {
            others.join(", ")
        },
    );
    if let Some(failure) = first_failure {
        eprintln!("first failure: {failure}");
    }
    let unexpected = refused.keys().any(|status| *status != 503);
    if failed > 0 || unexpected {
        return Err("some requests failed or got an answer other than 2xx or 503".into());
    }
    Ok(())
}

/// A JSON event padded to `size` bytes (at least its fixed part), which every
/// example's handler accepts.
fn event_of(size: usize) -> Vec<u8> {
    // `repository.full_name` and `commits` for the GitHub example's push handler
    let head = r#"{"type":"invoice.paid","timestamp":"2026-12-02T12:00:00Z","repository":{"full_name":"acme/load"},"commits":[{"id":"1"}],"data":{"id":"in_1NG8Du2eZvKYlo2C","amount_paid":2000,"currency":"usd","memo":""#;
    let tail = r#""}}"#;
    let pad = size.saturating_sub(head.len() + tail.len());
    format!("{head}{}{tail}", "x".repeat(pad)).into_bytes()
}
