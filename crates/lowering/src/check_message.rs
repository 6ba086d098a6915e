//! How a deferred check's message says what to raise. A check's flag is read
//! by the engine at the next host sync, long after the lowering ran, and the
//! engine keeps only the message text; so the exception kind, and how many
//! device-computed numbers the message quotes, lead the text as markers.
use crate::error::ErrorKind;

const RUNTIME: &str = "\u{0}RuntimeError\u{0}";
const LINALG: &str = "\u{0}LinAlgError\u{0}";
const QUOTES: &str = "\u{0}quotes ";

/// The stored form of a check raising `kind` (IndexError when unmarked)
/// whose flag buffer also carries `quoted` i64 values after the flag.
pub fn encode(kind: ErrorKind, quoted: usize, message: &str) -> String {
    let lead = match kind {
        ErrorKind::Runtime => RUNTIME,
        ErrorKind::LinAlg => LINALG,
        _ => "",
    };
    if quoted == 0 {
        format!("{lead}{message}")
    } else {
        format!("{QUOTES}{quoted}\u{0}{lead}{message}")
    }
}

/// How many values the flag buffer quotes after the flag (0: the buffer is
/// one i1 flag).
pub fn quoted_count(stored: &str) -> usize {
    split_quotes(stored).0
}

/// The exception and message of a failed check, with "{i}" replaced by
/// `values[i]`.
pub fn raised(stored: &str, values: &[i64]) -> (ErrorKind, String) {
    let (_, rest) = split_quotes(stored);
    let (kind, text) = if let Some(t) = rest.strip_prefix(RUNTIME) {
        (ErrorKind::Runtime, t)
    } else if let Some(t) = rest.strip_prefix(LINALG) {
        (ErrorKind::LinAlg, t)
    } else {
        (ErrorKind::Index, rest)
    };
    let mut text = text.to_string();
    for (i, v) in values.iter().enumerate() {
        text = text.replace(&format!("{{{i}}}"), &v.to_string());
    }
    (kind, text)
}

fn split_quotes(stored: &str) -> (usize, &str) {
    let Some(rest) = stored.strip_prefix(QUOTES) else {
        return (0, stored);
    };
    match rest.split_once('\u{0}') {
        Some((n, text)) => (n.parse().unwrap_or(0), text),
        None => (0, stored),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_and_quoted_values_survive_the_round_trip() {
        let plain = encode(ErrorKind::Index, 0, "index 3 out of range");
        assert_eq!(plain, "index 3 out of range");
        assert_eq!(quoted_count(&plain), 0);
        assert!(matches!(raised(&plain, &[]), (ErrorKind::Index, ref m) if m == "index 3 out of range"));

        let stored = encode(ErrorKind::Runtime, 2, "Index {0} of input takes value {1}");
        assert_eq!(quoted_count(&stored), 2);
        let (kind, text) = raised(&stored, &[1, 7]);
        assert_eq!(kind, ErrorKind::Runtime);
        assert_eq!(text, "Index 1 of input takes value 7");

        let (kind, text) = raised(&encode(ErrorKind::LinAlg, 0, "singular"), &[]);
        assert_eq!((kind, text.as_str()), (ErrorKind::LinAlg, "singular"));
    }
}
