//! The differing lines of two normalised outputs (issue 19 item 9): a line diff by longest
//! common subsequence, cut to a few lines for a failure message. Pure.

/// At most this many lines of each output are compared (lines past it are not shown).
pub const MAX_LINES: usize = 2000;

/// At most this many differing lines are shown.
pub const SHOWN: usize = 12;

/// The lines only in `left` (`- line`) and only in `right` (`+ line`), in order, at most
/// [`SHOWN`] of them and then `… N more differing lines`; empty when they are equal.
#[must_use]
pub fn differing_lines(left: &[String], right: &[String]) -> Vec<String> {
    let (a, b) = (
        &left[..left.len().min(MAX_LINES)],
        &right[..right.len().min(MAX_LINES)],
    );
    // lcs[i][j]: the longest common subsequence of a[i..] and b[j..].
    let mut lcs = vec![vec![0u32; b.len() + 1]; a.len() + 1];
    for i in (0..a.len()).rev() {
        for j in (0..b.len()).rev() {
            lcs[i][j] = if a[i] == b[j] {
                lcs[i + 1][j + 1] + 1
            } else {
                lcs[i + 1][j].max(lcs[i][j + 1])
            };
        }
    }
    let mut out = Vec::new();
    let (mut i, mut j) = (0, 0);
    while i < a.len() || j < b.len() {
        if i < a.len() && j < b.len() && a[i] == b[j] {
            i += 1;
            j += 1;
        } else if i < a.len() && (j == b.len() || lcs[i + 1][j] >= lcs[i][j + 1]) {
            out.push(format!("- {}", a[i]));
            i += 1;
        } else {
            out.push(format!("+ {}", b[j]));
            j += 1;
        }
    }
    if out.len() > SHOWN {
        let more = out.len() - SHOWN;
        out.truncate(SHOWN);
        out.push(format!("… {more} more differing lines"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(s: &[&str]) -> Vec<String> {
        s.iter().map(|l| (*l).to_string()).collect()
    }

    #[test]
    fn only_the_changed_lines_are_shown_in_order() {
        let a = v(&[
            "collected 3 items",
            "test_a PASSED",
            "test_b PASSED",
            "3 passed",
        ]);
        let b = v(&[
            "collected 3 items",
            "test_a PASSED",
            "test_b FAILED",
            "2 passed, 1 failed",
        ]);
        assert_eq!(
            differing_lines(&a, &b),
            [
                "- test_b PASSED",
                "- 3 passed",
                "+ test_b FAILED",
                "+ 2 passed, 1 failed"
            ]
        );
        assert!(differing_lines(&a, &a).is_empty());
        let many: Vec<String> = (0..30).map(|i| i.to_string()).collect();
        let d = differing_lines(&[], &many);
        assert_eq!(d.len(), SHOWN + 1);
        assert_eq!(d[SHOWN], "… 18 more differing lines");
    }
}
