//! Counts the heap allocations of one `Provider::verify` (and the drop of the delivery
//! it returns) for every provider, on the verify bench's bodies, and holds each
//! provider to its count.
//!
//! Run `cargo test -p hookbox-bench --test allocations -- --nocapture` to print them.
//!
//! The headers are verified once before counting: a `HeaderValue` built from a string
//! (as a test builds it) allocates a shared buffer the first time it is cloned, which
//! a server's values (slices of the request's buffer) never do.
#![allow(clippy::print_stdout, clippy::unwrap_used)] // printing the counts is the point

use hookbox_core::bytes::Bytes;
use hookbox_core::http::HeaderMap;
use hookbox_core::time::OffsetDateTime;
use hookbox_core::{Provider, Signer};

#[global_allocator]
static ALLOC: dhat::Alloc = dhat::Alloc;

const TIMESTAMP: i64 = 1_790_000_000;
const ID: &str = "msg_p5jXN8AQM9LWM0D4loKWxJek";
const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";

/// An event of about `size` bytes of type `kind`, `type` before `data` or
/// (`type_last`) after it, as the verify bench builds them.
fn event(size: usize, kind: &str, type_last: bool) -> Vec<u8> {
    let head =
        r#"{"id":"evt_1NG8Du2eZvKYlo2CUI79vXWy","object":"event","api_version":"2024-06-20","#;
    let data = r#""data":{"object":{"id":"pi_3MtwBwLkdIwHu7ix28a3tqPa","object":"payment_intent","amount":2000,"metadata":{"#;
    let kind = format!(r#""type":"{kind}""#);
    let mut json = if type_last {
        format!("{head}{data}")
    } else {
        format!("{head}{kind},{data}")
    };
    let mut i = 0;
    while json.len() < size {
        json.push_str(&format!(r#""key_{i:04}":"value {i}","#));
        i += 1;
    }
    json.push_str(r#""z":""}}}"#);
    if type_last {
        json.push_str(&format!(r#","livemode":false,"pending_webhooks":1,{kind}"#));
    }
    json.push('}');
    json.into_bytes()
}

/// One provider on one body, and the allocations it is held to.
struct Case<'a> {
    name: &'static str,
    provider: Box<dyn Provider>,
    headers: HeaderMap,
    body: &'a [u8],
    expected: u64,
}

/// A case for `provider`, whose deliveries `signer` signs, held to `expected`.
fn case<'a, P, S, E>(
    name: &'static str,
    provider: Result<P, E>,
    signer: Result<S, E>,
    body: &'a [u8],
    expected: u64,
) -> Case<'a>
where
    P: Provider + 'static,
    S: Signer,
    E: std::fmt::Debug,
{
    Case {
        name,
        provider: Box::new(provider.unwrap()),
        headers: signer.unwrap().sign(ID, TIMESTAMP, body).to_header_map(),
        body,
        expected,
    }
}

/// Returns how many allocations one verification of `body` makes.
fn allocations(provider: &dyn Provider, headers: &HeaderMap, body: &[u8]) -> u64 {
    let now = OffsetDateTime::from_unix_timestamp(TIMESTAMP).unwrap();
    let body = Bytes::copy_from_slice(body);
    provider.verify(headers, body.clone(), now).unwrap();
    let before = dhat::HeapStats::get().total_blocks;
    let delivery = provider.verify(headers, body.clone(), now).unwrap();
    drop(delivery);
    dhat::HeapStats::get().total_blocks - before
}

#[test]
fn allocations_per_verify() {
    let _profiler = dhat::Profiler::builder().testing().build();
    let mut counts = Vec::new();
    for size in [1024, 64 * 1024] {
        let body = event(size, "payment_intent.succeeded", false);
        let real = event(size, "payment_intent.succeeded", true);
        // `data.object.id:type` is 68 bytes, past the 62 a `DeliveryText` keeps inline
        let long = event(size, "payment_intent.amount_capturable_updated", true);
        let cases = [
            case(
                "stripe",
                hookbox_stripe::Stripe::new(SECRET),
                hookbox_stripe::StripeSigner::new(SECRET),
                &body,
                0,
            ),
            case(
                "stripe-real",
                hookbox_stripe::Stripe::new(SECRET),
                hookbox_stripe::StripeSigner::new(SECRET),
                &real,
                0,
            ),
            // the correlation id, on the heap
            case(
                "stripe-long",
                hookbox_stripe::Stripe::new(SECRET),
                hookbox_stripe::StripeSigner::new(SECRET),
                &long,
                1,
            ),
            // seven kept headers: the three past the four kept inline
            case(
                "shopify",
                hookbox_shopify::Shopify::new(SECRET),
                hookbox_shopify::ShopifySigner::new(SECRET),
                &body,
                1,
            ),
            case(
                "github",
                hookbox_github::GitHub::new(SECRET),
                hookbox_github::GitHubSigner::new(SECRET),
                &body,
                0,
            ),
            case(
                "svix",
                hookbox_svix::Svix::new(SECRET),
                hookbox_svix::SvixSigner::new(SECRET),
                &body,
                0,
            ),
            case(
                "standard",
                hookbox_standard::Standard::new(SECRET),
                hookbox_standard::StandardSigner::new(SECRET),
                &body,
                0,
            ),
        ];
        for Case {
            name,
            provider,
            headers,
            body,
            expected,
        } in cases
        {
            let count = allocations(&*provider, &headers, body);
            println!(
                "{name:<12} {:>3} KiB  {count} allocations per verify",
                size / 1024
            );
            counts.push((name, size, count, expected));
        }
    }
    for (name, size, count, expected) in counts {
        assert_eq!(count, expected, "{name} at {size} bytes");
    }
}
