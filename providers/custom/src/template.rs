//! The signed-content template: `{body}`, `{timestamp}`, `{id}`, `{url}` and literal text.

use crate::error::SchemeError;

/// One piece of the signed content.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Piece {
    /// The raw body.
    Body,
    /// The timestamp header, as sent.
    Timestamp,
    /// The id header, as sent.
    Id,
    /// The scheme's URL.
    Url,
    /// Text between placeholders.
    Literal(String),
}

/// Splits a template into literal text and the placeholders `{body}`,
/// `{timestamp}`, `{id}` and `{url}`; it must sign the body.
pub(crate) fn parse_template(template: &str) -> Result<Vec<Piece>, SchemeError> {
    let mut pieces = Vec::new();
    let mut rest = template;
    let mut at = 0;
    while let Some(open) = rest.find('{') {
        if open > 0 {
            pieces.push(Piece::Literal(rest[..open].to_string()));
        }
        let after = &rest[open + 1..];
        let close = after
            .find('}')
            .ok_or(SchemeError::UnterminatedPlaceholder { at: at + open })?;
        pieces.push(match &after[..close] {
            "body" => Piece::Body,
            "timestamp" => Piece::Timestamp,
            "id" => Piece::Id,
            "url" => Piece::Url,
            other => {
                return Err(SchemeError::UnknownPlaceholder {
                    placeholder: format!("{{{other}}}"),
                });
            }
        });
        at += open + close + 2;
        rest = &after[close + 1..];
    }
    if !rest.is_empty() {
        pieces.push(Piece::Literal(rest.to_string()));
    }
    if !pieces.contains(&Piece::Body) {
        return Err(SchemeError::TemplateWithoutBody);
    }
    Ok(pieces)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn templates_split_into_pieces() {
        assert_eq!(
            parse_template("v0:{timestamp}:{body}"),
            Ok(vec![
                Piece::Literal("v0:".into()),
                Piece::Timestamp,
                Piece::Literal(":".into()),
                Piece::Body,
            ])
        );
        assert_eq!(
            parse_template("{url}{body}"),
            Ok(vec![Piece::Url, Piece::Body])
        );
        assert_eq!(
            parse_template("{body}}"),
            Ok(vec![Piece::Body, Piece::Literal("}".into())])
        );
        assert_eq!(
            parse_template("ab{body"),
            Err(SchemeError::UnterminatedPlaceholder { at: 2 })
        );
        assert_eq!(
            parse_template("{id}.{Body}"),
            Err(SchemeError::UnknownPlaceholder {
                placeholder: "{Body}".into()
            })
        );
        assert_eq!(parse_template(""), Err(SchemeError::TemplateWithoutBody));
        assert_eq!(
            parse_template("{timestamp}"),
            Err(SchemeError::TemplateWithoutBody)
        );
    }
}
