//! Prints ns per verify for every provider, for a 1 KiB and a 64 KiB body, beside a bare
//! pre-keyed HMAC-SHA256 over the same signed bytes, the ratio of the two, with
//! `--features peer-baseline` the Rust peer `webhook-verify` 0.1 on the same request
//! (its `verify` over the same `http::HeaderMap`, for the providers it covers), and
//! with `--features svix-baseline` the official `svix` crate's `Webhook::verify`.
//!
//! The first five providers and Twitch verify the same Stripe-shaped event, whose
//! `type` comes before `data`; Slack, Zoom, Discord and Paddle verify an event of their
//! own shape, their key's fields where the provider puts them (Slack's `event_id`,
//! Zoom's `event_ts` and Discord's `id` after the large object, Paddle's `event_id`
//! first), and Discord's baseline is a bare Ed25519 `verify_strict`, not an HMAC; the `stripe-real` row verifies the same event in Stripe's own member order
//! (`id`, `object`, `api_version`, `created`, `data`, `livemode`, `pending_webhooks`,
//! `request`, `type`), where the Stripe scanner reads up to the last member.
//!
//! Twilio (its form body, beside a bare HMAC-SHA1 over the URL and the sorted
//! parameters it signs, and a JSON body), Square, Linear, GitLab (a secret token, and a
//! signing token) and two `hookbox-custom` schemes (Razorpay, Typeform) verify bodies
//! of their own shape (`url_cases.rs`).
//!
//! Run: `cargo run --release -p hookbox-bench --bin hookbox-bench`; `HOOKBOX_BENCH_ONLY=github,stripe`
//! limits it to those rows and `HOOKBOX_BENCH_BYTES=1024` to that body size.
//!
//! With `HOOKBOX_BENCH_JSON=<file>` every row is also written to `<file>` as one JSON
//! object per line: `{"provider": "...", "bytes": N, "ns": x, "bare_hmac_ns": x,
//! "ratio": x}`, with `"webhook_verify_ns"` and `"vs_webhook_verify"` (hookbox's time
//! over the peer's) where the peer was measured.
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

mod url_cases;

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
    /// What the bare check is.
    baseline: Baseline,
    /// The body the case verifies, when it is not the shared Stripe-shaped one (the
    /// providers that read their key from the body get a body of their own shape).
    own_body: Option<Vec<u8>>,
}

/// The bare check a case is compared with.
enum Baseline {
    /// A pre-keyed HMAC-SHA256 over `signed_prefix` and the body.
    HmacSha256,
    /// Discord signs with Ed25519: a bare `verify_strict` over the same bytes with a
    /// parsed key and signature.
    Ed25519(Box<(ed25519_dalek::VerifyingKey, ed25519_dalek::Signature)>),
    /// Twilio's form case: a pre-keyed HMAC-SHA1 over `signed_prefix` alone (the URL
    /// and the sorted parameters, which is all Twilio signs; the raw body is not).
    HmacSha1TextOnly,
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

    /// The row as one JSON line; `webhook_verify_ns` when the peer was measured.
    fn json(&self, peer_ns: Option<f64>) -> String {
        let peer = peer_ns.map_or_else(String::new, |ns| {
            format!(
                r#", "webhook_verify_ns": {ns:.1}, "vs_webhook_verify": {:.4}"#,
                self.ns / ns
            )
        });
        format!(
            r#"{{"provider": "{}", "bytes": {}, "ns": {:.1}, "bare_hmac_ns": {:.1}, "ratio": {:.4}{peer}}}"#,
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
        "{:<12}{:>8}{:>12}{:>12}{:>9}{:>16}{:>12}",
        "provider", "body", "hookbox", "bare HMAC", "ratio", "webhook-verify", "svix crate"
    );
    let mut json = String::new();
    for size in sizes.iter().copied() {
        let body = stripe_like_json(size, Order::TypeFirst);
        let real = stripe_like_json(size, Order::Stripe);
        let mut all: Vec<Case> = cases(&body)?;
        all.insert(1, stripe_case("stripe-real", &real)?);
        all.extend(handshake_cases(size, &body)?);
        all.extend(url_cases::url_and_token_cases(size)?);
        for case in all {
            let body = match (&case.own_body, case.name) {
                (Some(own), _) => &own[..],
                (None, "stripe-real") => &real[..],
                (None, _) => &body[..],
            };
            if !only
                .as_ref()
                .is_none_or(|only| only.iter().any(|o| o == case.name))
            {
                continue;
            }
            let row = measure_case(&case, body)?;
            let svix = svix_baseline(case.name, body)?
                .map_or_else(|| "-".to_string(), |ns| format!("{ns:.0}"));
            let peer = peer_baseline(&case, body)?;
            let peer_text = peer.map_or_else(|| "-".to_string(), |ns| format!("{ns:.0}"));
            println!(
                "{:<12}{:>8}{:>12.0}{:>12.0}{:>8.3}x{:>16}{:>12}",
                row.provider,
                format!("{} KiB", size / 1024),
                row.ns,
                row.bare_hmac_ns,
                row.ratio(),
                peer_text,
                svix
            );
            writeln!(json, "{}", row.json(peer))?;
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
    let keyed_sha1 = <Hmac<sha1::Sha1> as Mac>::new_from_slice(&case.hmac_key)?;
    let mut bare = || match &case.baseline {
        Baseline::Ed25519(pair) => {
            let (key, signature) = &**pair;
            // the signed message is one slice: the prefix and body copied together,
            // as any Ed25519 verifier of a split message must
            let mut message = Vec::with_capacity(case.signed_prefix.len() + body.len());
            message.extend_from_slice(black_box(&case.signed_prefix));
            message.extend_from_slice(black_box(body));
            black_box(key.verify_strict(&message, signature)).is_ok()
        }
        Baseline::HmacSha1TextOnly => {
            let mut mac = keyed_sha1.clone();
            mac.update(black_box(&case.signed_prefix));
            black_box(mac.finalize().into_bytes())[0] != 0
        }
        Baseline::HmacSha256 => {
            let mut mac = keyed.clone();
            mac.update(black_box(&case.signed_prefix));
            mac.update(black_box(body));
            black_box(mac.finalize().into_bytes())[0] != 0
        }
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

/// Returns the ns per call of the fastest of [`ROUNDS`] batches of `f` (a baseline
/// timed on its own, not interleaved with hookbox).
#[cfg(any(feature = "svix-baseline", feature = "peer-baseline"))]
fn fastest(f: &mut impl FnMut() -> bool) -> f64 {
    let iters = iterations(f);
    (0..ROUNDS)
        .map(|_| time_batch(f, iters))
        .fold(f64::INFINITY, f64::min)
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
            baseline: Baseline::HmacSha256,
            own_body: None,
        },
        Case {
            name: "github",
            provider: Box::new(hookbox_github::GitHub::new(HMAC_SECRET)?),
            headers: hookbox_github::GitHubSigner::new(HMAC_SECRET)?
                .sign(ID, TIMESTAMP, body)
                .to_header_map(),
            hmac_key: HMAC_SECRET.as_bytes().to_vec(),
            signed_prefix: Vec::new(),
            baseline: Baseline::HmacSha256,
            own_body: None,
        },
        Case {
            name: "svix",
            provider: Box::new(hookbox_svix::Svix::new(HMAC_SECRET)?),
            headers: hookbox_svix::SvixSigner::new(HMAC_SECRET)?
                .sign(ID, TIMESTAMP, body)
                .to_header_map(),
            hmac_key: standard_key.clone(),
            signed_prefix: standard_prefix.clone(),
            baseline: Baseline::HmacSha256,
            own_body: None,
        },
        Case {
            name: "standard",
            provider: Box::new(hookbox_standard::Standard::new(HMAC_SECRET)?),
            headers: hookbox_standard::StandardSigner::new(HMAC_SECRET)?
                .sign(ID, TIMESTAMP, body)
                .to_header_map(),
            hmac_key: standard_key,
            signed_prefix: standard_prefix,
            baseline: Baseline::HmacSha256,
            own_body: None,
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
        baseline: Baseline::HmacSha256,
        own_body: None,
    })
}

/// The providers that shake hands, and Paddle: each verifies an event in its own
/// provider's shape (padded to `size` in its nested object, the key's fields where the
/// provider puts them), except Twitch, which keys on a header and reads no body.
fn handshake_cases(size: usize, stripe: &[u8]) -> Result<Vec<Case>, Box<dyn std::error::Error>> {
    let ts = TIMESTAMP.to_string();
    let hmac_key = HMAC_SECRET.as_bytes().to_vec();
    // Slack sends `type` and `event_id` after the event
    let slack = padded_json(
        size,
        r#"{"token":"Jhj5dZrVaK7ZwHHjRyZWjbDl","team_id":"T0001","api_app_id":"A0001","event":{"type":"app_mention","user":"U0001","ts":"1515449522.000016","metadata":{"#,
        r#"}},"type":"event_callback","event_id":"Ev0PV52K21","event_time":1515449522}"#,
    );
    // Zoom sends `event_ts` after the payload
    let zoom = padded_json(
        size,
        r#"{"event":"meeting.started","payload":{"account_id":"D8cJuqWVQ623CI4Q8yQK0Q","object":{"id":"6962400003","topic":"My Meeting","settings":{"#,
        r#"}}},"event_ts":1626230691572}"#,
    );
    // an interaction, its members in alphabetical order (`id` and `type` after `data`)
    let discord = padded_json(
        size,
        r#"{"application_id":"775799577604522054","channel_id":"772908445358620702","data":{"id":"866818195033292850","name":"blep","options":{"#,
        r#"}},"id":"786008729715212338","token":"A_UNIQUE_TOKEN","type":2,"version":1}"#,
    );
    // Paddle sends `event_id` and `event_type` first
    let paddle = padded_json(
        size,
        r#"{"event_id":"evt_01h8bzakzx3hm2fmen703n5q45","event_type":"transaction.completed","occurred_at":"2023-08-21T11:57:47.390028Z","notification_id":"ntf_01h8bzam1z32agrxjwhjgqk8w6","data":{"id":"txn_01h8bz8kvr4xwyaz49fd8b5tj2","custom_data":{"#,
        r#"}}}"#,
    );
    let twitch_headers =
        hookbox_twitch::TwitchSigner::new(HMAC_SECRET)?.sign(ID, TIMESTAMP, stripe);
    let twitch_prefix = format!(
        "{ID}{}",
        twitch_headers
            .get("Twitch-Eventsub-Message-Timestamp")
            .ok_or("the signer writes the timestamp")?
    );
    let discord_signer = hookbox_discord::DiscordSigner::new(&"42".repeat(32))?;
    let discord_headers = discord_signer.sign(ID, TIMESTAMP, &discord);
    let key: [u8; 32] = hex::decode(discord_signer.public_key_hex())?
        .try_into()
        .map_err(|_| "a public key is 32 bytes")?;
    let signature: [u8; 64] = hex::decode(
        discord_headers
            .get("X-Signature-Ed25519")
            .ok_or("the signer writes the signature")?,
    )?
    .try_into()
    .map_err(|_| "a signature is 64 bytes")?;
    let ed25519 = Baseline::Ed25519(Box::new((
        ed25519_dalek::VerifyingKey::from_bytes(&key)?,
        ed25519_dalek::Signature::from_bytes(&signature),
    )));
    Ok(vec![
        Case {
            name: "slack",
            provider: Box::new(hookbox_slack::Slack::new(HMAC_SECRET)?),
            headers: hookbox_slack::SlackSigner::new(HMAC_SECRET)?
                .sign(ID, TIMESTAMP, &slack)
                .to_header_map(),
            hmac_key: hmac_key.clone(),
            signed_prefix: format!("v0:{ts}:").into_bytes(),
            baseline: Baseline::HmacSha256,
            own_body: Some(slack),
        },
        Case {
            name: "twitch",
            provider: Box::new(hookbox_twitch::Twitch::new(HMAC_SECRET)?),
            headers: twitch_headers.to_header_map(),
            hmac_key: hmac_key.clone(),
            signed_prefix: twitch_prefix.into_bytes(),
            baseline: Baseline::HmacSha256,
            own_body: None,
        },
        Case {
            name: "zoom",
            provider: Box::new(hookbox_zoom::Zoom::new(HMAC_SECRET)?),
            headers: hookbox_zoom::ZoomSigner::new(HMAC_SECRET)?
                .sign(ID, TIMESTAMP, &zoom)
                .to_header_map(),
            hmac_key: hmac_key.clone(),
            signed_prefix: format!("v0:{ts}:").into_bytes(),
            baseline: Baseline::HmacSha256,
            own_body: Some(zoom),
        },
        Case {
            name: "discord",
            provider: Box::new(hookbox_discord::Discord::new(
                discord_signer.public_key_hex(),
            )?),
            headers: discord_headers.to_header_map(),
            hmac_key: hmac_key.clone(),
            signed_prefix: ts.clone().into_bytes(),
            baseline: ed25519,
            own_body: Some(discord),
        },
        Case {
            name: "paddle",
            provider: Box::new(hookbox_paddle::Paddle::new(HMAC_SECRET)?),
            headers: hookbox_paddle::PaddleSigner::new(HMAC_SECRET)?
                .sign(ID, TIMESTAMP, &paddle)
                .to_header_map(),
            hmac_key,
            signed_prefix: format!("{ts}:").into_bytes(),
            baseline: Baseline::HmacSha256,
            own_body: Some(paddle),
        },
    ])
}

/// `head`, small fields, a padded last field and `tail`: exactly `size` bytes of JSON.
fn padded_json(size: usize, head: &str, tail: &str) -> Vec<u8> {
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
    let last = r#""z":"""#;
    let pad = size.saturating_sub(json.len() + tail.len() + last.len());
    json.push_str(&format!(r#""z":"{}""#, "x".repeat(pad)));
    json.push_str(tail);
    json.into_bytes()
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
    Ok(Some(fastest(&mut f)))
}

#[cfg(not(feature = "svix-baseline"))]
fn svix_baseline(_name: &str, _body: &[u8]) -> Result<Option<f64>, Box<dyn std::error::Error>> {
    Ok(None)
}

/// The peer's ns per verify of the same request, for the providers it covers; `None`
/// for the others. Its options (the clock pinned to the signed time) are built per
/// call, as its `verify` takes them by value.
#[cfg(feature = "peer-baseline")]
fn peer_baseline(case: &Case, body: &[u8]) -> Result<Option<f64>, Box<dyn std::error::Error>> {
    use std::sync::Arc;
    use webhook_verify::{Clock, Provider as Peer, Secret, VerifyOptions};

    struct At;
    impl Clock for At {
        fn now(&self) -> u64 {
            TIMESTAMP as u64
        }
    }
    let (provider, secret) = match case.name {
        "github" => (Peer::GitHub, Secret::new(HMAC_SECRET)),
        "stripe" | "stripe-real" => (Peer::Stripe, Secret::new(HMAC_SECRET)),
        "shopify" => (Peer::Shopify, Secret::new(HMAC_SECRET)),
        "standard" => (Peer::StandardWebhooks, Secret::new(HMAC_SECRET)),
        "slack" => (Peer::Slack, Secret::new(HMAC_SECRET)),
        "zoom" => (Peer::Zoom, Secret::new(HMAC_SECRET)),
        "discord" => (
            Peer::Discord,
            Secret::new(hookbox_discord::DiscordSigner::new(&"42".repeat(32))?.public_key_hex()),
        ),
        _ => return Ok(None),
    };
    let clock: Arc<dyn Clock> = Arc::new(At);
    let options = || VerifyOptions::default().with_clock(Some(clock.clone()));
    // measured only where it accepts the request hookbox accepts
    if let Err(err) = webhook_verify::verify(provider, &case.headers, body, &secret, options()) {
        return Err(format!("webhook-verify refuses the {} request: {err}", case.name).into());
    }
    let mut f = || {
        webhook_verify::verify(
            black_box(provider),
            black_box(&case.headers),
            black_box(body),
            &secret,
            options(),
        )
        .is_ok()
    };
    Ok(Some(fastest(&mut f)))
}

#[cfg(not(feature = "peer-baseline"))]
fn peer_baseline(_case: &Case, _body: &[u8]) -> Result<Option<f64>, Box<dyn std::error::Error>> {
    Ok(None)
}
