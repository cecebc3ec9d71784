//! Prints ns per verify for every provider, for a 1 KiB and a 64 KiB body, beside a bare
//! pre-keyed HMAC-SHA256 over the same signed bytes, the ratio of the two, and (with
//! `--features svix-baseline`) the official `svix` crate's `Webhook::verify`.
//!
//! Every provider verifies the same Stripe-shaped event, whose `type` comes before
//! `data`; the `stripe-real` row verifies the same event in Stripe's own member order
//! (`id`, `object`, `api_version`, `created`, `data`, `livemode`, `pending_webhooks`,
//! `request`, `type`), where the Stripe scanner reads up to the last member.
//!
//! Run: `cargo run --release -p hookbox-bench --bin hookbox-bench`; `HOOKBOX_BENCH_ONLY=github,stripe`
//! limits it to those rows and `HOOKBOX_BENCH_BYTES=1024` to that body size.
//!
//! With `HOOKBOX_BENCH_JSON=<file>` every row is also written to `<file>` as one JSON
//! object per line: `{"provider": "...", "bytes": N, "ns": x, "bare_hmac_ns": x,
//! "ratio": x}`.
#![allow(clippy::print_stdout)] // printing the table is this binary's job

use std::fmt::Write as _;
use std::hint::black_box;
use std::time::{Duration, Instant};

use base64::Engine as _;
use hmac::{Hmac, Mac};
use hookbox_core::bytes::Bytes;
use hookbox_core::http::HeaderMap;
use hookbox_core::time::OffsetDateTime;
use hookbox_core::{Provider, Signer};
use sha2::Sha256;

const TIMESTAMP: i64 = 1_790_000_000;
const ID: &str = "msg_p5jXN8AQM9LWM0D4loKWxJek";
const HMAC_SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";

/// Rounds per case; each round times one batch of the verify and one of the bare HMAC.
const ROUNDS: usize = 21;
/// How long one batch runs.
const BATCH: Duration = Duration::from_millis(15);

/// One provider's case: what to verify and which bytes a bare HMAC would cover.
struct Case {
    name: &'static str,
    provider: Box<dyn Provider>,
    headers: HeaderMap,
    hmac_key: Vec<u8>,
    signed_prefix: Vec<u8>,
}

/// One row of the table.
struct Row {
    provider: &'static str,
    bytes: usize,
    ns: f64,
    bare_hmac_ns: f64,
}

impl Row {
    fn ratio(&self) -> f64 {
        self.ns / self.bare_hmac_ns
    }

    fn json(&self) -> String {
        format!(
            r#"{{"provider": "{}", "bytes": {}, "ns": {:.1}, "bare_hmac_ns": {:.1}, "ratio": {:.4}}}"#,
            self.provider,
            self.bytes,
            self.ns,
            self.bare_hmac_ns,
            self.ratio()
        )
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let json_path = std::env::var_os("HOOKBOX_BENCH_JSON");
    // `HOOKBOX_BENCH_BYTES=1024` limits the run to one body size (for a profiler)
    let sizes: Vec<usize> = match std::env::var("HOOKBOX_BENCH_BYTES") {
        Ok(bytes) => vec![bytes.parse()?],
        Err(_) => vec![1024, 64 * 1024],
    };
    // `HOOKBOX_BENCH_ONLY=github,stripe` limits the run to those rows (for a profiler)
    let only = std::env::var("HOOKBOX_BENCH_ONLY")
        .ok()
        .map(|only| only.split(',').map(str::to_owned).collect::<Vec<_>>());
    println!(
        "hookbox verify benchmark: ns per verify, the fastest of {ROUNDS} interleaved rounds of {} ms",
        BATCH.as_millis()
    );
    println!("(ratio = hookbox / bare pre-keyed HMAC-SHA256 over the same signed bytes)");
    println!(
        "{:<12}{:>8}{:>12}{:>12}{:>9}{:>12}",
        "provider", "body", "hookbox", "bare HMAC", "ratio", "svix crate"
    );
    let mut json = String::new();
    for size in sizes.iter().copied() {
        let body = stripe_like_json(size, Order::TypeFirst);
        let real = stripe_like_json(size, Order::Stripe);
        let mut all: Vec<(Case, &[u8])> =
            cases(&body)?.into_iter().map(|c| (c, &body[..])).collect();
        all.insert(1, (stripe_case("stripe-real", &real)?, &real[..]));
        for (case, body) in all {
            if !only
                .as_ref()
                .is_none_or(|only| only.iter().any(|o| o == case.name))
            {
                continue;
            }
            let row = measure_case(&case, body)?;
            let svix = svix_baseline(case.name, body)?
                .map_or_else(|| "-".to_string(), |ns| format!("{ns:.0}"));
            println!(
                "{:<12}{:>8}{:>12.0}{:>12.0}{:>8.3}x{:>12}",
                row.provider,
                format!("{} KiB", size / 1024),
                row.ns,
                row.bare_hmac_ns,
                row.ratio(),
                svix
            );
            writeln!(json, "{}", row.json())?;
        }
    }
    if let Some(path) = json_path {
        std::fs::write(&path, json)?;
        println!("wrote {}", path.to_string_lossy());
    }
    Ok(())
}

/// Times the provider's verify and the bare HMAC in alternating batches, so that both
/// see the same machine; the fastest batch of each is the figure (other processes only
/// ever add time).
fn measure_case(case: &Case, body: &[u8]) -> Result<Row, Box<dyn std::error::Error>> {
    let now = OffsetDateTime::from_unix_timestamp(TIMESTAMP)?;
    // a server moves the body it read into `verify`; a static `Bytes` gives each call
    // its own handle without the reference count a shared one would add per call
    let bytes = Bytes::from_static(Vec::leak(body.to_vec()));
    // the bench is only meaningful if the deliveries verify
    case.provider.verify(&case.headers, bytes.clone(), now)?;
    let mut ours = || {
        black_box(
            case.provider
                .verify(black_box(&case.headers), black_box(bytes.clone()), now),
        )
        .is_ok()
    };
    let keyed = <Hmac<Sha256> as Mac>::new_from_slice(&case.hmac_key)?;
    let mut bare = || {
        let mut mac = keyed.clone();
        mac.update(black_box(&case.signed_prefix));
        mac.update(black_box(body));
        black_box(mac.finalize().into_bytes())[0] != 0
    };
    let ours_iters = iterations(&mut ours);
    let bare_iters = iterations(&mut bare);
    let (mut ns, mut bare_hmac_ns) = (f64::INFINITY, f64::INFINITY);
    for round in 0..ROUNDS {
        // alternate which side goes first, so neither always runs on a warmer cache
        if round % 2 == 0 {
            ns = ns.min(time_batch(&mut ours, ours_iters));
            bare_hmac_ns = bare_hmac_ns.min(time_batch(&mut bare, bare_iters));
        } else {
            bare_hmac_ns = bare_hmac_ns.min(time_batch(&mut bare, bare_iters));
            ns = ns.min(time_batch(&mut ours, ours_iters));
        }
    }
    Ok(Row {
        provider: case.name,
        bytes: body.len(),
        ns,
        bare_hmac_ns,
    })
}

/// Returns how many calls of `f` fill one batch.
fn iterations(f: &mut impl FnMut() -> bool) -> u64 {
    let mut iters: u64 = 1;
    loop {
        let start = Instant::now();
        for _ in 0..iters {
            black_box(f());
        }
        let elapsed = start.elapsed();
        if elapsed >= BATCH / 4 {
            let per_call = elapsed.as_secs_f64() / iters as f64;
            return ((BATCH.as_secs_f64() / per_call) as u64).max(1);
        }
        iters *= 2;
    }
}

/// Returns the ns per call of one batch of `iters` calls.
fn time_batch(f: &mut impl FnMut() -> bool, iters: u64) -> f64 {
    let start = Instant::now();
    for _ in 0..iters {
        black_box(f());
    }
    start.elapsed().as_nanos() as f64 / iters as f64
}

fn cases(body: &[u8]) -> Result<Vec<Case>, Box<dyn std::error::Error>> {
    let ts = TIMESTAMP.to_string();
    let standard_prefix = format!("{ID}.{ts}.").into_bytes();
    let standard_key = base64::engine::general_purpose::STANDARD
        .decode(HMAC_SECRET.trim_start_matches("whsec_"))?;
    Ok(vec![
        stripe_case("stripe", body)?,
        Case {
            name: "shopify",
            provider: Box::new(hookbox_shopify::Shopify::new(HMAC_SECRET)?),
            headers: hookbox_shopify::ShopifySigner::new(HMAC_SECRET)?
                .sign(ID, TIMESTAMP, body)
                .to_header_map(),
            hmac_key: HMAC_SECRET.as_bytes().to_vec(),
            signed_prefix: Vec::new(),
        },
        Case {
            name: "github",
            provider: Box::new(hookbox_github::GitHub::new(HMAC_SECRET)?),
            headers: hookbox_github::GitHubSigner::new(HMAC_SECRET)?
                .sign(ID, TIMESTAMP, body)
                .to_header_map(),
            hmac_key: HMAC_SECRET.as_bytes().to_vec(),
            signed_prefix: Vec::new(),
        },
        Case {
            name: "svix",
            provider: Box::new(hookbox_svix::Svix::new(HMAC_SECRET)?),
            headers: hookbox_svix::SvixSigner::new(HMAC_SECRET)?
                .sign(ID, TIMESTAMP, body)
                .to_header_map(),
            hmac_key: standard_key.clone(),
            signed_prefix: standard_prefix.clone(),
        },
        Case {
            name: "standard",
            provider: Box::new(hookbox_standard::Standard::new(HMAC_SECRET)?),
            headers: hookbox_standard::StandardSigner::new(HMAC_SECRET)?
                .sign(ID, TIMESTAMP, body)
                .to_header_map(),
            hmac_key: standard_key,
            signed_prefix: standard_prefix,
        },
    ])
}

/// The Stripe case named `name`, signed over `body`.
fn stripe_case(name: &'static str, body: &[u8]) -> Result<Case, Box<dyn std::error::Error>> {
    Ok(Case {
        name,
        provider: Box::new(hookbox_stripe::Stripe::new(HMAC_SECRET)?),
        headers: hookbox_stripe::StripeSigner::new(HMAC_SECRET)?
            .sign(ID, TIMESTAMP, body)
            .to_header_map(),
        hmac_key: HMAC_SECRET.as_bytes().to_vec(),
        signed_prefix: format!("{TIMESTAMP}.").into_bytes(),
    })
}

/// Where the event's `type` is.
#[derive(Clone, Copy)]
enum Order {
    /// Before `data`: the Stripe scanner stops after `data.object.id`, near the start.
    TypeFirst,
    /// Stripe's own order, `type` last (after `data`, `livemode`, `pending_webhooks` and
    /// `request`): the scanner skips `data` and reads on to the last member.
    Stripe,
}

/// A Stripe-shaped event padded with many small fields (in `data.object.metadata`) to
/// exactly `size` bytes, so that providers which read the JSON pay a realistic
/// parsing cost.
fn stripe_like_json(size: usize, order: Order) -> Vec<u8> {
    let (head, tail) = match order {
        Order::TypeFirst => (
            r#"{"id":"evt_1NG8Du2eZvKYlo2CUI79vXWy","object":"event","api_version":"2024-06-20","type":"payment_intent.succeeded","data":{"object":{"id":"pi_3NG8Du2eZvKYlo2C1","object":"payment_intent","amount":2000,"currency":"usd","metadata":{"#,
            r#"}}}}"#,
        ),
        Order::Stripe => (
            r#"{"id":"evt_1NG8Du2eZvKYlo2CUI79vXWy","object":"event","api_version":"2024-06-20","created":1790000000,"data":{"object":{"id":"pi_3NG8Du2eZvKYlo2C1","object":"payment_intent","amount":2000,"currency":"usd","metadata":{"#,
            r#"}}},"livemode":false,"pending_webhooks":1,"request":{"id":"req_8xVBqRtQbJnW3k","idempotency_key":"5e2f7a1c-9b3d-4e8a-b6f0-2c4d8e1a7b95"},"type":"payment_intent.succeeded"}"#,
        ),
    };
    let mut json = head.to_string();
    let mut i = 0;
    loop {
        let field = format!(r#""key_{i:04}":"value {i}","#);
        if json.len() + field.len() + tail.len() + 8 > size {
            break;
        }
        json.push_str(&field);
        i += 1;
    }
    // pad the last value so the body is exactly `size` bytes
    let pad = size - json.len() - tail.len() - r#""z":"""#.len();
    json.push_str(&format!(r#""z":"{}""#, "x".repeat(pad)));
    json.push_str(tail);
    debug_assert_eq!(json.len(), size);
    json.into_bytes()
}

#[cfg(feature = "svix-baseline")]
fn svix_baseline(name: &str, body: &[u8]) -> Result<Option<f64>, Box<dyn std::error::Error>> {
    if name != "svix" {
        return Ok(None);
    }
    let headers = hookbox_svix::SvixSigner::new(HMAC_SECRET)?
        .sign(ID, TIMESTAMP, body)
        .to_header_map();
    let webhook = svix::webhooks::Webhook::new(HMAC_SECRET)?;
    webhook.verify_ignoring_timestamp(body, &headers)?;
    let mut f = || {
        webhook
            .verify_ignoring_timestamp(black_box(body), black_box(&headers))
            .is_ok()
    };
    let iters = iterations(&mut f);
    Ok(Some(
        (0..ROUNDS)
            .map(|_| time_batch(&mut f, iters))
            .fold(f64::INFINITY, f64::min),
    ))
}

#[cfg(not(feature = "svix-baseline"))]
fn svix_baseline(_name: &str, _body: &[u8]) -> Result<Option<f64>, Box<dyn std::error::Error>> {
    Ok(None)
}
