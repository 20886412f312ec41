//! `egress.ca_certs`: the CA files the proxy trusts, read after validation (the spec parser
//! does no I/O). Each must be a regular file of at most [`MAX_CA_BYTES`] holding at least one
//! PEM certificate block; anything else is a diagnostic naming the file, line and key.

use std::io::Read as _;

use crate::spec::{Diagnostic, Spec};

/// The largest CA file cyclix accepts, in bytes (1 MiB: a bundle of a few hundred CAs).
pub const MAX_CA_BYTES: u64 = 1024 * 1024;

/// Whether `text` holds a PEM certificate block: a `-----BEGIN CERTIFICATE-----` line, base64
/// lines, an `-----END CERTIFICATE-----` line (RFC 7468 §5). Squid parses it for real.
#[must_use]
pub fn has_pem_certificate(text: &str) -> bool {
    let mut inside = false;
    let mut body = 0usize;
    for line in text.lines().map(str::trim) {
        match (inside, line) {
            (false, "-----BEGIN CERTIFICATE-----") => {
                inside = true;
                body = 0;
            }
            (true, "-----END CERTIFICATE-----") => {
                if body > 0 {
                    return true;
                }
                inside = false;
            }
            (true, l) => {
                if l.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'/' | b'='))
                {
                    body += l.len();
                } else {
                    inside = false;
                }
            }
            (false, _) => {}
        }
    }
    false
}

/// Reads one CA file: `Err((message, fix))` when it is missing, not a regular file, too
/// large, not text or holds no PEM certificate.
fn check_file(path: &str) -> Result<(), (String, String)> {
    let fix_path = "point `egress.ca_certs` at an existing PEM file (a CA certificate, `-----BEGIN CERTIFICATE-----`)".to_string();
    let meta = std::fs::metadata(path)
        .map_err(|e| (format!("CA file `{path}`: {e}"), fix_path.clone()))?;
    if !meta.is_file() {
        return Err((format!("CA file `{path}` is not a regular file"), fix_path));
    }
    if meta.len() > MAX_CA_BYTES {
        return Err((
            format!(
                "CA file `{path}` is {} bytes, more than {MAX_CA_BYTES}",
                meta.len()
            ),
            "list only the CA certificates the proxy needs".into(),
        ));
    }
    let mut text = String::new();
    std::fs::File::open(path)
        .and_then(|f| f.take(MAX_CA_BYTES + 1).read_to_string(&mut text))
        .map_err(|e| {
            (
                format!("CA file `{path}` cannot be read as text: {e}"),
                fix_path.clone(),
            )
        })?;
    if !has_pem_certificate(&text) {
        return Err((
            format!("CA file `{path}` holds no PEM certificate"),
            "convert it to PEM (`openssl x509 -in CA.der -inform der -out CA.pem`)".into(),
        ));
    }
    Ok(())
}

/// One diagnostic per unusable `egress.ca_certs` entry of `spec`.
#[must_use]
pub fn check(spec: &Spec) -> Vec<Diagnostic> {
    spec.egress
        .ca_certs
        .iter()
        .enumerate()
        .filter_map(|(i, c)| {
            check_file(&c.path).err().map(|(msg, fix)| {
                Diagnostic::at(c.line, c.column, &format!("egress.ca_certs[{i}]"), msg).hint(fix)
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::has_pem_certificate;

    #[test]
    fn a_pem_block_is_recognised_and_other_text_is_not() {
        assert!(has_pem_certificate(
            "x\n-----BEGIN CERTIFICATE-----\nMIIB+/=\nAbc\n-----END CERTIFICATE-----\n"
        ));
        assert!(!has_pem_certificate(
            "-----BEGIN CERTIFICATE-----\n-----END CERTIFICATE-----\n"
        ));
        assert!(!has_pem_certificate(
            "-----BEGIN PRIVATE KEY-----\nMIIB\n-----END PRIVATE KEY-----\n"
        ));
        assert!(!has_pem_certificate("not a certificate"));
    }
}
