//! Server URLs: the same server, another database.

/// Returns `url` (`mysql://user:password@host:port/database?params`, or
/// `mariadb://…`) with `database` as its database, the scheme, credentials, host,
/// port and parameters (`ssl-mode` and the rest) kept; `None` when `url` has no
/// `scheme://`.
///
/// MySQL's schemas are its databases, and the store's tables live in the URL's
/// database: a tool that runs in a database of its own (a test, a demo, a bench)
/// connects to the URL this returns. A password's `/` may be percent-encoded or not.
///
/// # Examples
/// ```
/// use hookbox_diesel_mysql::url_with_database;
///
/// assert_eq!(
///     url_with_database("mysql://app@db:3306/app?ssl-mode=REQUIRED", "hb_test").as_deref(),
///     Some("mysql://app@db:3306/hb_test?ssl-mode=REQUIRED"),
/// );
/// assert_eq!(url_with_database("db:3306", "hb_test"), None);
/// ```
pub fn url_with_database(url: &str, database: &str) -> Option<String> {
    let (scheme, rest) = url.split_once("://")?;
    // the parameters start at the first `?` (or `#`)
    let (rest, params) = rest
        .find(['?', '#'])
        .map_or((rest, ""), |at| rest.split_at(at));
    // the path starts at the first `/` after any credentials
    let host_at = rest.rfind('@').map_or(0, |at| at + 1);
    let authority = rest[host_at..]
        .find('/')
        .map_or(rest, |slash| &rest[..host_at + slash]);
    Some(format!("{scheme}://{authority}/{database}{params}"))
}

#[cfg(test)]
mod tests {
    use super::url_with_database;

    #[test]
    fn the_database_replaces_the_path_and_keeps_the_rest() {
        let cases = [
            (
                "mysql://root@127.0.0.1:3306/test",
                "mysql://root@127.0.0.1:3306/hb",
            ),
            (
                "mysql://root@127.0.0.1:3306",
                "mysql://root@127.0.0.1:3306/hb",
            ),
            (
                "mysql://root@127.0.0.1:3306/",
                "mysql://root@127.0.0.1:3306/hb",
            ),
            ("mysql://root@db", "mysql://root@db/hb"),
            (
                "mysql://u:p%2Fw@db:3306/test?ssl-mode=DISABLED",
                "mysql://u:p%2Fw@db:3306/hb?ssl-mode=DISABLED",
            ),
            (
                "mariadb://app:p%2Fw@db/app?ssl-mode=REQUIRED&ssl-ca=/ca.pem",
                "mariadb://app:p%2Fw@db/hb?ssl-mode=REQUIRED&ssl-ca=/ca.pem",
            ),
            (
                "mysql://db?ssl-mode=DISABLED",
                "mysql://db/hb?ssl-mode=DISABLED",
            ),
            ("mysql://u:a/b@db/test", "mysql://u:a/b@db/hb"),
        ];
        for (url, expected) in cases {
            assert_eq!(
                url_with_database(url, "hb").as_deref(),
                Some(expected),
                "{url}"
            );
        }
        assert_eq!(url_with_database("not a url", "hb"), None);
    }
}
