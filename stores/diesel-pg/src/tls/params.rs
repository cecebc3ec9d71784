//! Connection-string parsing: `sslmode` and `sslrootcert` taken out of a
//! `postgres://` URL or a `key=value` string (tokio-postgres knows neither
//! `verify-ca`, `verify-full` nor `sslrootcert`), the rest left for tokio-postgres.

use std::error::Error as StdError;

use diesel::ConnectionError;

use crate::error::PgError;

/// The parameters this module handles, as found in a connection string.
#[derive(Debug, Default, PartialEq, Eq)]
pub(super) struct TlsParams {
    pub(super) sslmode: Option<String>,
    pub(super) sslrootcert: Option<String>,
}

/// Takes `sslmode` and `sslrootcert` out of a connection string, leaving the rest
/// for tokio-postgres. A string this cannot take apart is returned unchanged, for
/// tokio-postgres to report.
pub(super) fn split_params(conn: &str) -> Result<(String, TlsParams), PgError> {
    let url = ["postgres://", "postgresql://"]
        .iter()
        .any(|prefix| conn.starts_with(prefix));
    if url {
        split_url(conn)
    } else {
        Ok(split_key_value(conn).unwrap_or_else(|| (conn.to_string(), TlsParams::default())))
    }
}

fn take(params: &mut TlsParams, key: &str, value: String) -> bool {
    match key {
        "sslmode" => params.sslmode = Some(value),
        "sslrootcert" => params.sslrootcert = Some(value),
        _ => return false,
    }
    true
}

/// The URL form: `postgres://…?sslmode=verify-full&sslrootcert=/etc/ca.pem&…`.
fn split_url(url: &str) -> Result<(String, TlsParams), PgError> {
    let mut params = TlsParams::default();
    // tokio-postgres reads everything up to the first `@` as user and password, so
    // the query starts at the first `?` after it
    let authority = url.find('@').map_or(0, |at| at + 1);
    let Some(at) = url[authority..].find('?').map(|at| authority + at) else {
        return Ok((url.to_string(), params));
    };
    let (base, query) = (&url[..at], &url[at + 1..]);
    let mut kept = Vec::new();
    for pair in query.split('&') {
        let handled = match pair.split_once('=') {
            Some((key, value)) => {
                let key = percent_decode(key)?;
                let value = percent_decode(value)?;
                take(&mut params, &key, value)
            }
            None => false,
        };
        if !handled {
            kept.push(pair);
        }
    }
    let rest = if kept.is_empty() {
        base.to_string()
    } else {
        format!("{base}?{}", kept.join("&"))
    };
    Ok((rest, params))
}

/// Decodes `%XX` escapes (an invalid escape stays as written, as tokio-postgres
/// reads it).
fn percent_decode(text: &str) -> Result<String, PgError> {
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
            _ => {
                out.push(byte);
                i += 1;
            }
        }
    }
    String::from_utf8(out).map_err(|_| {
        PgError::Connect(ConnectionError::InvalidConnectionUrl(format!(
            "a parameter of the connection URL is not UTF-8 once decoded: {text:?}"
        )))
    })
}

/// The key/value form: `host=db.internal sslmode=verify-full sslrootcert='/etc/ca.pem'`,
/// with tokio-postgres's quoting (`'…'`, backslash escapes). `None` when it cannot
/// be taken apart.
fn split_key_value(conn: &str) -> Option<(String, TlsParams)> {
    let mut params = TlsParams::default();
    let mut kept = Vec::new();
    let mut chars = conn.char_indices().peekable();
    loop {
        while chars.next_if(|(_, c)| c.is_whitespace()).is_some() {}
        let Some(&(start, _)) = chars.peek() else {
            break;
        };
        let mut key = String::new();
        while let Some((_, c)) = chars.next_if(|(_, c)| !c.is_whitespace() && *c != '=') {
            key.push(c);
        }
        while chars.next_if(|(_, c)| c.is_whitespace()).is_some() {}
        chars.next_if(|(_, c)| *c == '=')?;
        while chars.next_if(|(_, c)| c.is_whitespace()).is_some() {}
        let mut value = String::new();
        if chars.next_if(|(_, c)| *c == '\'').is_some() {
            loop {
                match chars.next()? {
                    (_, '\'') => break,
                    (_, '\\') => value.push(chars.next()?.1),
                    (_, c) => value.push(c),
                }
            }
        } else {
            while let Some((_, c)) = chars.next_if(|(_, c)| !c.is_whitespace()) {
                if c == '\\' {
                    value.push(chars.next()?.1);
                } else {
                    value.push(c);
                }
            }
        }
        let end = chars.peek().map_or(conn.len(), |&(i, _)| i);
        if !take(&mut params, &key, value) {
            // as written: tokio-postgres reads the quoting again
            kept.push(&conn[start..end]);
        }
    }
    Some((kept.join(" "), params))
}

pub(super) fn invalid_url(err: &tokio_postgres::Error) -> PgError {
    // tokio-postgres's message names the bad part ("invalid value for option `port`")
    let detail = err.source().map_or_else(String::new, |s| format!(": {s}"));
    PgError::Connect(ConnectionError::InvalidConnectionUrl(format!(
        "invalid connection string{detail}"
    )))
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio_postgres::Config;

    fn split(conn: &str) -> (String, TlsParams) {
        split_params(conn).unwrap_or_else(|err| panic!("{conn}: {err}"))
    }

    #[test]
    fn sslmode_and_sslrootcert_are_taken_out_of_a_url() {
        let (rest, params) = split(
            "postgres://app:pw@db.internal:5433/app?application_name=hb&sslmode=verify-full&sslrootcert=%2Fetc%2Fca%20file.pem&connect_timeout=3",
        );
        assert_eq!(
            rest,
            "postgres://app:pw@db.internal:5433/app?application_name=hb&connect_timeout=3"
        );
        assert_eq!(params.sslmode.as_deref(), Some("verify-full"));
        assert_eq!(params.sslrootcert.as_deref(), Some("/etc/ca file.pem"));

        let (rest, params) = split("postgresql://app@localhost/app?sslmode=require");
        assert_eq!(rest, "postgresql://app@localhost/app");
        assert_eq!(params.sslmode.as_deref(), Some("require"));

        let (rest, params) = split("postgres://app@localhost/app");
        assert_eq!(rest, "postgres://app@localhost/app");
        assert_eq!(params, TlsParams::default());

        // a `?` in the password is the password's
        let (rest, params) = split("postgres://app:p?sslmode=x@localhost/app?sslmode=disable");
        assert_eq!(rest, "postgres://app:p?sslmode=x@localhost/app");
        assert_eq!(params.sslmode.as_deref(), Some("disable"));
        // bad escapes stay as written; a decoded value must be UTF-8
        assert_eq!(percent_decode("a%2x%41%").ok().as_deref(), Some("a%2xA%"));
        assert!(split_params("postgres://a@h/d?sslrootcert=%ff").is_err());
    }

    #[test]
    fn sslmode_and_sslrootcert_are_taken_out_of_a_key_value_string() {
        let (rest, params) = split(
            "host=db.internal sslmode = verify-ca  user=app sslrootcert='/etc/my ca\\'s.pem' dbname=app",
        );
        assert_eq!(rest, "host=db.internal user=app dbname=app");
        assert_eq!(params.sslmode.as_deref(), Some("verify-ca"));
        assert_eq!(params.sslrootcert.as_deref(), Some("/etc/my ca's.pem"));
        // what tokio-postgres accepts is left as it was
        let parsed: Config = rest.parse().unwrap_or_else(|err| panic!("{err}"));
        assert_eq!(parsed.get_user(), Some("app"));

        let (rest, params) = split("host=/run/postgresql user=app");
        assert_eq!(rest, "host=/run/postgresql user=app");
        assert_eq!(params, TlsParams::default());
    }
}
