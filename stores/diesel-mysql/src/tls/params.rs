//! URL parsing: `ssl-mode` and `ssl-ca` taken out of a `mysql://` URL (mysql_async
//! knows neither), the driver's own TLS parameters refused beside them, the rest
//! left for mysql_async.

use diesel::ConnectionError;

use crate::error::MysqlError;

/// mysql_async's own TLS switches: `ssl-mode` says the same in MySQL's words, and
/// two spellings of one setting could disagree.
const DRIVER_TLS_PARAMS: &[&str] = &[
    "require_ssl",
    "verify_ca",
    "verify_identity",
    "built_in_roots",
];

/// The parameters this module handles, as found in a URL.
#[derive(Debug, Default, PartialEq, Eq)]
pub(super) struct TlsParams {
    pub(super) ssl_mode: Option<String>,
    pub(super) ssl_ca: Option<String>,
    /// Whether the URL sets mysql_async's `prefer_socket` itself.
    pub(super) prefer_socket: bool,
}

/// Takes `ssl-mode` and `ssl-ca` out of a `mysql://` URL, leaving the rest for
/// mysql_async (which reports a malformed URL itself).
///
/// # Errors
/// [`MysqlError::TlsSettings`] when the URL also uses mysql_async's own TLS
/// parameters; [`MysqlError::Connect`] when a parameter is not UTF-8 once decoded.
pub(super) fn split_params(url: &str) -> Result<(String, TlsParams), MysqlError> {
    let mut params = TlsParams::default();
    // the user and password end at the first `@`; the query starts at the first `?`
    // after it
    let authority = url.find('@').map_or(0, |at| at + 1);
    let Some(at) = url[authority..].find('?').map(|at| authority + at) else {
        return Ok((url.to_string(), params));
    };
    let (base, query) = (&url[..at], &url[at + 1..]);
    let mut kept = Vec::new();
    for pair in query.split('&') {
        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
        let key = percent_decode(key)?;
        match key.as_str() {
            "ssl-mode" => params.ssl_mode = Some(percent_decode(value)?),
            "ssl-ca" => params.ssl_ca = Some(percent_decode(value)?),
            driver if DRIVER_TLS_PARAMS.contains(&driver) => {
                return Err(MysqlError::TlsSettings {
                    reason: format!(
                        "the URL parameter {driver} is not supported: use ssl-mode \
                         ({}) and ssl-ca",
                        crate::SslMode::ALLOWED
                    ),
                    source: None,
                });
            }
            other => {
                params.prefer_socket |= other == "prefer_socket";
                kept.push(pair);
            }
        }
    }
    let rest = if kept.is_empty() {
        base.to_string()
    } else {
        format!("{base}?{}", kept.join("&"))
    };
    Ok((rest, params))
}

/// Decodes `%XX` escapes (an invalid escape stays as written) and `+` as a space.
fn percent_decode(text: &str) -> Result<String, MysqlError> {
    fn hex(byte: Option<&u8>) -> Option<u8> {
        byte.and_then(|&b| char::from(b).to_digit(16))
            .and_then(|digit| u8::try_from(digit).ok())
    }
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while let Some(&byte) = bytes.get(i) {
        match (byte, hex(bytes.get(i + 1)), hex(bytes.get(i + 2))) {
            (b'%', Some(hi), Some(lo)) => {
                out.push((hi << 4) | lo);
                i += 3;
            }
            (b'+', _, _) => {
                out.push(b' ');
                i += 1;
            }
            _ => {
                out.push(byte);
                i += 1;
            }
        }
    }
    String::from_utf8(out).map_err(|_| {
        MysqlError::Connect(ConnectionError::InvalidConnectionUrl(format!(
            "a parameter of the connection URL is not UTF-8 once decoded: {text:?}"
        )))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn split(url: &str) -> (String, TlsParams) {
        split_params(url).unwrap_or_else(|err| panic!("{url}: {err}"))
    }

    #[test]
    fn ssl_mode_and_ssl_ca_are_taken_out_of_a_url() {
        let (rest, params) = split(
            "mysql://app:pw@db.internal:3307/app?conn_ttl=30&ssl-mode=VERIFY_IDENTITY&ssl-ca=%2Fetc%2Fca%20file.pem&tcp_nodelay=true",
        );
        assert_eq!(
            rest,
            "mysql://app:pw@db.internal:3307/app?conn_ttl=30&tcp_nodelay=true"
        );
        assert_eq!(params.ssl_mode.as_deref(), Some("VERIFY_IDENTITY"));
        assert_eq!(params.ssl_ca.as_deref(), Some("/etc/ca file.pem"));
        assert!(!params.prefer_socket);

        let (rest, params) = split("mysql://app@localhost/app?ssl-mode=required");
        assert_eq!(rest, "mysql://app@localhost/app");
        assert_eq!(params.ssl_mode.as_deref(), Some("required"));

        let (rest, params) = split("mysql://app@localhost/app");
        assert_eq!(rest, "mysql://app@localhost/app");
        assert_eq!(params, TlsParams::default());

        let (rest, params) = split("mysql://app@localhost/app?prefer_socket=true");
        assert_eq!(rest, "mysql://app@localhost/app?prefer_socket=true");
        assert!(params.prefer_socket);
        // a `?` in the password is the password's
        let (rest, params) = split("mysql://app:p?ssl-mode=x@localhost/app?ssl-mode=DISABLED");
        assert_eq!(rest, "mysql://app:p?ssl-mode=x@localhost/app");
        assert_eq!(params.ssl_mode.as_deref(), Some("DISABLED"));
        assert!(split_params("mysql://a@h/d?ssl-ca=%ff").is_err());
    }

    #[test]
    fn the_drivers_own_tls_parameters_are_refused() {
        for param in DRIVER_TLS_PARAMS {
            let err = split_params(&format!("mysql://a@h/d?{param}=true")).unwrap_err();
            assert!(matches!(err, MysqlError::TlsSettings { .. }), "{err:?}");
            assert!(err.to_string().contains("use ssl-mode"), "{err}");
        }
    }
}
