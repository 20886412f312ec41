//! `build: { devcontainer: PATH }` (issue 15, item 1): the subset of a `devcontainer.json`
//! (JSON with comments and trailing commas, read with the `jsonc-parser` crate) that cyclix
//! builds: `image`, `build.dockerfile`, `build.context`, `build.args`, `containerEnv`,
//! `remoteUser` (and `name`, a label). Anything else — `features`, `postCreateCommand`,
//! `mounts`, `runArgs`, … — would run or mount something the spec does not see, and is refused
//! naming the field and the fix. Pure.
//!
//! Paths in the file are relative to its directory (the Dev Container specification,
//! <https://containers.dev/implementors/json_reference>); they are resolved to repository paths here and
//! may not leave the repository.

use serde_json::Value;

/// What a `devcontainer.json` asks cyclix to build.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Devcontainer {
    /// `image`: the image to start from (then no Dockerfile).
    pub image: Option<String>,
    /// `build.dockerfile`, as a repository path.
    pub dockerfile: Option<String>,
    /// `build.context` as a repository path (default: the file's directory).
    pub context: String,
    /// `build.args`, sorted.
    pub args: Vec<(String, String)>,
    /// `containerEnv`, sorted: `ENV` lines appended to the image.
    pub env: Vec<(String, String)>,
    /// `remoteUser`: a `USER` line appended to the image.
    pub user: Option<String>,
}

/// The top-level fields cyclix reads.
const TOP: &[&str] = &["name", "image", "build", "containerEnv", "remoteUser"];
/// The fields of `build` cyclix reads.
const BUILD: &[&str] = &["dockerfile", "context", "args"];

/// Reads `text`, the file at repository path `path`.
///
/// # Errors
/// A message naming `path`, the field and the fix: not JSON with comments, an unsupported
/// field, neither or both of `image` and `build.dockerfile`, a path leaving the repository, a
/// value of the wrong type, an invalid variable or user name.
pub fn parse(text: &str, path: &str) -> Result<Devcontainer, String> {
    let value = jsonc_parser::parse_to_serde_value(text, &jsonc_parser::ParseOptions::default())
        .map_err(|e| format!("{path}: not JSON with comments: {e}; fix: correct the file"))?;
    let Some(Value::Object(top)) = value else {
        return Err(format!("{path}: expected a JSON object"));
    };
    for k in top.keys() {
        if !TOP.contains(&k.as_str()) {
            return Err(format!(
                "{path}: `{k}` is not supported by cyclix (it reads only {}); fix: remove `{k}` and put what it does into the Dockerfile (`build.dockerfile`), or use `build: {{ containerfile: … }}` in the spec",
                TOP.join(", ")
            ));
        }
    }
    let dir = path.rsplit_once('/').map_or("", |(d, _)| d);
    let image = string(top.get("image"), path, "image")?;
    let (mut dockerfile, mut context, mut args) = (None, dir.to_string(), Vec::new());
    if let Some(b) = top.get("build") {
        let Value::Object(b) = b else {
            return Err(format!("{path}: `build` must be an object"));
        };
        for k in b.keys() {
            if !BUILD.contains(&k.as_str()) {
                return Err(format!(
                    "{path}: `build.{k}` is not supported by cyclix (it reads only build.{}); fix: remove it",
                    BUILD.join(", build.")
                ));
            }
        }
        if let Some(d) = string(b.get("dockerfile"), path, "build.dockerfile")? {
            dockerfile =
                Some(resolve(dir, &d).ok_or_else(|| leaves(path, "build.dockerfile", &d))?);
        }
        if let Some(c) = string(b.get("context"), path, "build.context")? {
            context = resolve(dir, &c).ok_or_else(|| leaves(path, "build.context", &c))?;
        }
        args = pairs(b.get("args"), path, "build.args")?;
    }
    if image.is_some() == dockerfile.is_some() {
        return Err(format!(
            "{path}: set exactly one of `image` and `build.dockerfile`; fix: name the image to start from, or the Dockerfile to build"
        ));
    }
    let env = pairs(top.get("containerEnv"), path, "containerEnv")?;
    if let Some((k, _)) = env.iter().chain(args.iter()).find(|(k, _)| !name(k)) {
        return Err(format!(
            "{path}: `{}` is not a variable name; fix: use [A-Za-z_][A-Za-z0-9_]*",
            k.escape_debug()
        ));
    }
    let user = string(top.get("remoteUser"), path, "remoteUser")?;
    if let Some(u) = &user
        && (u.is_empty()
            || !u
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.')))
    {
        return Err(format!(
            "{path}: remoteUser `{}` is not a user name; fix: a name or uid such as `node` or `1000`",
            u.escape_debug()
        ));
    }
    Ok(Devcontainer {
        image,
        dockerfile,
        context: if context.is_empty() {
            ".".into()
        } else {
            context
        },
        args,
        env,
        user,
    })
}

impl Devcontainer {
    /// The lines appended to the Containerfile (`ENV K="V"`, `USER U`), each value quoted
    /// with `\`, `"` and `$` escaped (no substitution).
    #[must_use]
    pub fn tail_lines(&self) -> String {
        use std::fmt::Write as _;
        let mut out = String::new();
        for (k, v) in &self.env {
            let q: String = v
                .chars()
                .flat_map(|c| match c {
                    '\\' | '"' | '$' => vec!['\\', c],
                    '\n' => vec!['\\', 'n'],
                    c => vec![c],
                })
                .collect();
            let _ = writeln!(out, "ENV {k}=\"{q}\"");
        }
        if let Some(u) = &self.user {
            let _ = writeln!(out, "USER {u}");
        }
        out
    }
}

fn leaves(path: &str, field: &str, value: &str) -> String {
    format!("{path}: `{field}` `{value}` leaves the repository; fix: name a path inside it")
}

fn string(v: Option<&Value>, path: &str, field: &str) -> Result<Option<String>, String> {
    match v {
        None => Ok(None),
        Some(Value::String(s)) if !s.chars().any(char::is_control) => Ok(Some(s.clone())),
        Some(_) => Err(format!("{path}: `{field}` must be a one-line string")),
    }
}

fn pairs(v: Option<&Value>, path: &str, field: &str) -> Result<Vec<(String, String)>, String> {
    let Some(v) = v else {
        return Ok(Vec::new());
    };
    let Value::Object(m) = v else {
        return Err(format!("{path}: `{field}` must be an object of strings"));
    };
    let mut out = Vec::new();
    for (k, v) in m {
        let Value::String(s) = v else {
            return Err(format!("{path}: `{field}.{k}` must be a string"));
        };
        out.push((k.clone(), s.clone()));
    }
    out.sort();
    Ok(out)
}

fn name(s: &str) -> bool {
    s.chars()
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// `rel` (relative to repository directory `dir`) as a repository path, `.` for the top;
/// `None` when it is absolute or leaves the repository.
fn resolve(dir: &str, rel: &str) -> Option<String> {
    if rel.starts_with('/') || rel.contains('\\') {
        return None;
    }
    let mut parts: Vec<&str> = dir.split('/').filter(|p| !p.is_empty()).collect();
    for c in rel.split('/') {
        match c {
            "" | "." => {}
            ".." => {
                parts.pop()?;
            }
            c if c.eq_ignore_ascii_case(".git") => return None,
            c => parts.push(c),
        }
    }
    Some(if parts.is_empty() {
        ".".to_string()
    } else {
        parts.join("/")
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const FILE: &str = ".devcontainer/devcontainer.json";

    #[test]
    fn the_supported_fields_are_read_with_comments_and_paths_resolved() {
        let d = parse(
            r#"{
  // a comment
  "name": "app",
  "build": { "dockerfile": "Dockerfile", "context": "..", "args": { "V": "22" } },
  "containerEnv": { "NODE_ENV": "test", "Q": "a\"$b" },
  "remoteUser": "node", /* trailing comma: */
}"#,
            FILE,
        )
        .expect("reads");
        assert_eq!(d.dockerfile.as_deref(), Some(".devcontainer/Dockerfile"));
        assert_eq!(d.context, ".");
        assert_eq!(d.args, [("V".into(), "22".into())]);
        assert_eq!(
            d.tail_lines(),
            "ENV NODE_ENV=\"test\"\nENV Q=\"a\\\"\\$b\"\nUSER node\n"
        );
        let i = parse(r#"{"image": "localhost/x:1"}"#, FILE).expect("reads");
        assert_eq!(
            (i.image.as_deref(), i.context.as_str()),
            (Some("localhost/x:1"), ".devcontainer")
        );
    }

    #[test]
    fn features_and_other_fields_are_refused_naming_the_field_and_the_fix() {
        for (text, want) in [
            (
                r#"{"image": "x", "features": {"ghcr.io/x": {}}}"#,
                "`features` is not supported",
            ),
            (
                r#"{"image": "x", "postCreateCommand": "npm i"}"#,
                "`postCreateCommand` is not supported",
            ),
            (
                r#"{"build": {"dockerfile": "D", "target": "t"}}"#,
                "`build.target` is not supported",
            ),
            (
                r#"{"build": {"dockerfile": "../../D"}}"#,
                "leaves the repository",
            ),
            (
                r#"{"name": "x"}"#,
                "exactly one of `image` and `build.dockerfile`",
            ),
            (
                r#"{"image": "x", "containerEnv": {"1A": "x"}}"#,
                "not a variable name",
            ),
            (r#"{"image": "x", "remoteUser": "a b"}"#, "not a user name"),
            ("{", "not JSON with comments"),
        ] {
            let e = parse(text, FILE).expect_err(text);
            assert!(e.contains(want) && e.starts_with(FILE), "{text}: {e}");
            assert!(e.contains("fix:"), "{e}");
        }
    }
}
