//! Numbers as the bench tables print them.

/// `12345.6` as `12,346`.
pub fn thousands(value: f64) -> String {
    let digits = format!("{:.0}", value.max(0.0));
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// Prints each of `anomalies` on a line of its own, `ANOMALY: …`.
#[allow(clippy::print_stdout)] // the tables' last lines
pub fn print_anomalies(anomalies: &[String]) {
    for anomaly in anomalies {
        println!("ANOMALY: {anomaly}");
    }
}

#[cfg(test)]
mod tests {
    use super::thousands;

    #[test]
    fn groups_digits_by_three() {
        assert_eq!(thousands(0.4), "0");
        assert_eq!(thousands(999.0), "999");
        assert_eq!(thousands(1000.0), "1,000");
        assert_eq!(thousands(12345.6), "12,346");
        assert_eq!(thousands(1234567.0), "1,234,567");
        assert_eq!(thousands(-5.0), "0");
    }
}
