//! The providers that sign the URL they call or send a token, Linear, and two
//! providers described by a `hookbox-custom` scheme: each verifies a body of its own
//! provider's shape, padded to the row's size, beside the bare MAC over the same signed
//! content.

use hookbox_core::Signer as _;

use crate::{Baseline, Case, HMAC_SECRET, ID, TIMESTAMP, padded_json};

/// The URL Twilio and Square sign.
const PUBLIC_URL: &str = "https://hooks.example.com/webhooks/inbound?tenant=acme";

/// The cases, for a body of about `size` bytes.
pub(crate) fn url_and_token_cases(size: usize) -> Result<Vec<Case>, Box<dyn std::error::Error>> {
    let hmac_key = HMAC_SECRET.as_bytes().to_vec();
    let mut cases = twilio_cases(size)?;

    // Square sends `type` and `event_id` before `data`
    let square = padded_json(
        size,
        r#"{"merchant_id":"6SSW7HV8K2ST5","type":"payment.updated","event_id":"13b867cf-db3d-4b1c-90b6-2f32a9d78124","created_at":"2020-02-06T21:27:34.308Z","data":{"type":"payment","id":"KkAkhdMsgzn59SM8A89WgKwekxLZY","object":{"#,
        r#"}}}"#,
    );
    cases.push(Case {
        name: "square",
        provider: Box::new(hookbox_square::Square::new(HMAC_SECRET, PUBLIC_URL)?),
        headers: hookbox_square::SquareSigner::new(HMAC_SECRET, PUBLIC_URL)?
            .sign(ID, TIMESTAMP, &square)
            .to_header_map(),
        hmac_key: hmac_key.clone(),
        signed_prefix: PUBLIC_URL.as_bytes().to_vec(),
        baseline: Baseline::HmacSha256,
        own_body: Some(square),
    });

    // Linear sends `webhookTimestamp` after `data`, near the end
    let linear = padded_json(
        size,
        r#"{"action":"create","type":"Issue","data":{"id":"2174add1-f7c8-44e3-bbf3-2d60b5ea8bc9","title":"Bug","labels":{"#,
        &format!(
            r#"}}}},"url":"https://linear.app/issue/LIN-1778","createdAt":"2023-02-10T19:22:20.508Z","webhookTimestamp":{},"webhookId":"000042e3-d123-4980-b49f-8e140eef9329"}}"#,
            TIMESTAMP * 1000
        ),
    );
    cases.push(Case {
        name: "linear",
        provider: Box::new(hookbox_linear::Linear::new(HMAC_SECRET)?),
        headers: hookbox_linear::LinearSigner::new(HMAC_SECRET)?
            .sign(ID, TIMESTAMP, &linear)
            .to_header_map(),
        hmac_key: hmac_key.clone(),
        signed_prefix: Vec::new(),
        baseline: Baseline::HmacSha256,
        own_body: Some(linear),
    });

    // GitLab with a secret token reads no body and computes no MAC; with a signing
    // token it is Standard Webhooks over the same body
    let push = padded_json(
        size,
        r#"{"object_kind":"push","event_name":"push","ref":"refs/heads/main","commits":{"#,
        r#"}}"#,
    );
    cases.push(Case {
        name: "gitlab-token",
        provider: Box::new(hookbox_gitlab::GitLab::new(HMAC_SECRET)?),
        headers: hookbox_gitlab::GitLabSigner::new(HMAC_SECRET)?
            .sign(ID, TIMESTAMP, &push)
            .to_header_map(),
        hmac_key: hmac_key.clone(),
        signed_prefix: Vec::new(),
        baseline: Baseline::HmacSha256,
        own_body: Some(push.clone()),
    });
    let ts = TIMESTAMP.to_string();
    cases.push(Case {
        name: "gitlab-signed",
        provider: Box::new(hookbox_gitlab::GitLab::signed(HMAC_SECRET)?),
        headers: hookbox_gitlab::GitLabSigner::signed(HMAC_SECRET)?
            .sign(ID, TIMESTAMP, &push)
            .to_header_map(),
        hmac_key: base64::Engine::decode(
            &base64::engine::general_purpose::STANDARD,
            HMAC_SECRET.trim_start_matches("whsec_"),
        )?,
        signed_prefix: format!("{ID}.{ts}.").into_bytes(),
        baseline: Baseline::HmacSha256,
        own_body: Some(push),
    });

    cases.extend(scheme_cases(size)?);
    Ok(cases)
}

/// Twilio's two shapes: a status callback's form (the signed content is the URL and
/// the sorted, decoded parameters, which the baseline MACs as one text) and a JSON
/// body (the URL carries the body's SHA-256).
fn twilio_cases(size: usize) -> Result<Vec<Case>, Box<dyn std::error::Error>> {
    let mut form = String::from(
        "AccountSid=AC0123456789abcdef0123456789abcdef&ApiVersion=2010-04-01&From=%2B15017122661&MessageSid=SM1f0e8ae6ade43cb3c0ce4525424e404f&MessageStatus=delivered&SmsSid=SM1f0e8ae6ade43cb3c0ce4525424e404f&SmsStatus=delivered&To=%2B15558675310&Body=",
    );
    let words = "Hello+from+hookbox%21+";
    while form.len() + words.len() <= size {
        form.push_str(words);
    }
    while form.len() < size {
        form.push('x');
    }
    let form = form.into_bytes();
    let mut pairs: Vec<(String, String)> = form_urlencoded::parse(&form).into_owned().collect();
    pairs.sort();
    let mut signed = PUBLIC_URL.to_string();
    for (name, value) in &pairs {
        signed.push_str(name);
        signed.push_str(value);
    }
    let json = padded_json(
        size,
        r#"{"account_sid":"AC0123456789abcdef0123456789abcdef","sid":"EV1","data":{"#,
        r#"}}"#,
    );
    let signer = hookbox_twilio::TwilioSigner::new(HMAC_SECRET, PUBLIC_URL)?;
    Ok(vec![
        Case {
            name: "twilio-form",
            provider: Box::new(hookbox_twilio::Twilio::new(HMAC_SECRET, PUBLIC_URL)?),
            headers: signer.sign(ID, TIMESTAMP, &form).to_header_map(),
            hmac_key: HMAC_SECRET.as_bytes().to_vec(),
            signed_prefix: signed.into_bytes(),
            baseline: Baseline::HmacSha1TextOnly,
            own_body: Some(form),
        },
        Case {
            name: "twilio-json",
            provider: Box::new(hookbox_twilio::Twilio::new(HMAC_SECRET, PUBLIC_URL)?),
            headers: signer.sign(ID, TIMESTAMP, &json).to_header_map(),
            hmac_key: HMAC_SECRET.as_bytes().to_vec(),
            // the body's SHA-256 dominates: the baseline is an HMAC-SHA256 of the body
            signed_prefix: Vec::new(),
            baseline: Baseline::HmacSha256,
            own_body: Some(json),
        },
    ])
}

/// The two schemes of docs/providers.md: Razorpay keys on a header and reads its
/// event type from the body, Typeform keys on the body's `event_id`.
fn scheme_cases(size: usize) -> Result<Vec<Case>, Box<dyn std::error::Error>> {
    use hookbox_custom::{Custom, CustomSigner, Scheme};

    let razorpay = Scheme::from_toml(include_str!("../../providers/custom/schemes/razorpay.toml"))?;
    let typeform = Scheme::from_toml(include_str!("../../providers/custom/schemes/typeform.toml"))?;
    let razorpay_body = padded_json(
        size,
        r#"{"entity":"event","account_id":"acc_BFQ7uQEaa7j2z7","event":"payment.captured","contains":["payment"],"payload":{"payment":{"entity":{"notes":{"#,
        r#"}}}},"created_at":1567674606}"#,
    );
    let typeform_body = padded_json(
        size,
        r#"{"event_id":"01FKAPTM1TPR2Y3ZQ4TPEV5X0J","event_type":"form_response","form_response":{"form_id":"lT4Z3j","answers":{"#,
        r#"}}}"#,
    );
    let hmac_key = HMAC_SECRET.as_bytes().to_vec();
    Ok(vec![
        Case {
            name: "razorpay",
            headers: CustomSigner::new(razorpay.clone(), HMAC_SECRET)?
                .sign(ID, TIMESTAMP, &razorpay_body)
                .to_header_map(),
            provider: Box::new(Custom::new(razorpay, HMAC_SECRET)?),
            hmac_key: hmac_key.clone(),
            signed_prefix: Vec::new(),
            baseline: Baseline::HmacSha256,
            own_body: Some(razorpay_body),
        },
        Case {
            name: "typeform",
            headers: CustomSigner::new(typeform.clone(), HMAC_SECRET)?
                .sign(ID, TIMESTAMP, &typeform_body)
                .to_header_map(),
            provider: Box::new(Custom::new(typeform, HMAC_SECRET)?),
            hmac_key,
            signed_prefix: Vec::new(),
            baseline: Baseline::HmacSha256,
            own_body: Some(typeform_body),
        },
    ])
}
