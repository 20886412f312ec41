//! The preset table: one row of data per agent CLI (`agent.preset`, issue 14 item 1).
//!
//! A row says which image runs the CLI (built by `cyclix images build --preset NAME` from an
//! exact, hash-pinned package: `images/agents/packages.lock`), the uid it runs as, its headless
//! argv, how the task reaches it, the fixed variables it gets (config and cache dirs on the
//! run's `/tmp` tmpfs, telemetry and update checks off), its credential (the API host, the
//! header and scheme, the paths its CLI uses: the proxy adds the key, the agent never holds it)
//! and the parser of its output stream. Facts: `research/agents.md`; the request paths were
//! measured against the testbed's stand-in (docs/agents.md).

use super::stream::StreamKind;

/// The model name that selects a preset's cheapest model (`agent.model: cheapest`).
pub const CHEAPEST: &str = "cheapest";

/// How the task reaches the CLI.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TaskInput {
    /// On its standard input (`cyclix agent-wait --stdin /cyclix/task.md`).
    Stdin,
    /// As the file named after this flag (`aider --message-file /cyclix/task.md`).
    FileFlag(&'static str),
}

/// The credential a preset's CLI needs: the proxy adds the key for `host` (issue 13).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CredentialTemplate {
    /// The variable holding the key on the host; the CLI reads the placeholder from it.
    pub env: &'static str,
    /// The API host (`agent.api_host` replaces it, e.g. for a company gateway).
    pub host: &'static str,
    /// The header the API reads the key from (lowercase).
    pub header: &'static str,
    /// Whether the key is written as `Bearer KEY` (else the header is the key).
    pub bearer: bool,
    /// The request paths the CLI uses (exact, or `/dir/*`).
    pub paths: &'static [&'static str],
    /// The request methods the CLI uses.
    pub methods: &'static [&'static str],
    /// What the placeholder starts with (the vendor's key prefix).
    pub placeholder_prefix: &'static str,
    /// The variable the CLI reads its base URL from.
    pub base_url_env: &'static str,
    /// What the CLI expects after `http://HOST:PORT` in its base URL (`/v1` for `OpenAI`'s).
    pub base_url_path: &'static str,
}

/// One agent CLI.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Preset {
    /// The `agent.preset` value.
    pub name: &'static str,
    /// The package the image installs, `REGISTRY NAME@VERSION` (pinned by hash in
    /// `images/agents/packages.lock`).
    pub package: &'static str,
    /// The image `cyclix images build --preset NAME` builds (a local build of the pinned
    /// package).
    pub image: &'static str,
    /// The uid (and gid) the CLI runs as inside its container; the pod maps the host user to
    /// it (`UserNS=keep-id:uid=U,gid=U`), so the work tree is its own. Claude Code refuses
    /// its no-confirmation mode as uid 0 (anthropics/claude-code#3490).
    pub uid: u32,
    /// The headless argv before the model and turn flags.
    pub argv: &'static [&'static str],
    /// The flag that takes the model name (`--model`).
    pub model_flag: &'static str,
    /// The CLI's own turn cap flag (`--max-turns`), if it has one.
    pub max_turns_flag: Option<&'static str>,
    /// Words after the flags (`-`: read the prompt from stdin).
    pub argv_tail: &'static [&'static str],
    /// How the task reaches the CLI.
    pub task_input: TaskInput,
    /// Fixed variables (never secrets): config/cache dirs under `/tmp`, switches off.
    pub env: &'static [(&'static str, &'static str)],
    /// Its API credential.
    pub credential: CredentialTemplate,
    /// The model [`CHEAPEST`] stands for.
    pub cheapest: &'static str,
    /// How its output stream is read into the run record.
    pub stream: StreamKind,
}

/// The uid preset CLIs run as (the images' `agent` user).
pub const AGENT_UID: u32 = 1000;

/// Every preset, `script` (today's behaviour: the spec's own image and command) first.
pub const PRESETS: &[&str] = &["script", "claude-code", "codex", "aider", "gemini-cli"];

const CLAUDE_CODE: Preset = Preset {
    name: "claude-code",
    package: "npm @anthropic-ai/claude-code@2.1.332",
    image: "localhost/cyclix-agent-claude-code:2.1.332",
    uid: AGENT_UID,
    argv: &[
        "claude",
        "-p",
        "--output-format",
        "stream-json",
        "--verbose",
        "--permission-mode",
        "bypassPermissions",
    ],
    model_flag: "--model",
    max_turns_flag: Some("--max-turns"),
    argv_tail: &[],
    task_input: TaskInput::Stdin,
    env: &[
        ("CLAUDE_CONFIG_DIR", "/tmp/.claude"),
        ("DISABLE_AUTOUPDATER", "1"),
        ("DISABLE_TELEMETRY", "1"),
        ("DISABLE_ERROR_REPORTING", "1"),
        ("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1"),
        ("CLAUDE_CODE_MAX_RETRIES", "2"),
    ],
    credential: CredentialTemplate {
        env: "ANTHROPIC_API_KEY",
        host: "api.anthropic.com",
        header: "x-api-key",
        bearer: false,
        paths: &["/v1/messages"],
        methods: &["POST"],
        placeholder_prefix: "sk-ant-api03-",
        base_url_env: "ANTHROPIC_BASE_URL",
        base_url_path: "",
    },
    cheapest: "claude-haiku-5-5",
    stream: StreamKind::ClaudeStreamJson,
};

/// Codex 0.171 ignores `OPENAI_BASE_URL` and, for its built-in provider, tries a `WebSocket`
/// first: a provider of its own in `$CODEX_HOME/config.toml` (on the run's tmpfs) points it at
/// the credential port over plain HTTP with `wire_api = "responses"`. Analytics, update checks,
/// plugins and apps off: without them it reaches ab.chatgpt.com, chatgpt.com and github.com
/// (measured against the stand-in). Two retries, so a refused key fails in seconds.
const CODEX_SCRIPT: &str = concat!(
    "mkdir -p \"$CODEX_HOME\" && printf 'model_provider = \"cyclix\"\\n",
    "[model_providers.cyclix]\\nname = \"cyclix\"\\nbase_url = \"%s\"\\n",
    "env_key = \"OPENAI_API_KEY\"\\nwire_api = \"responses\"\\n",
    "request_max_retries = 2\\nstream_max_retries = 2\\n' \"$OPENAI_BASE_URL\" ",
    "> \"$CODEX_HOME/config.toml\" && exec codex exec --json --skip-git-repo-check ",
    "--sandbox danger-full-access -c analytics.enabled=false ",
    "-c check_for_update_on_startup=false --disable plugins --disable apps \"$@\""
);

const CODEX: Preset = Preset {
    name: "codex",
    package: "npm @openai/codex@0.171.0",
    image: "localhost/cyclix-agent-codex:0.171.0",
    uid: AGENT_UID,
    argv: &["sh", "-c", CODEX_SCRIPT, "codex"],
    model_flag: "--model",
    max_turns_flag: None,
    argv_tail: &["-"],
    task_input: TaskInput::Stdin,
    env: &[("CODEX_HOME", "/tmp/.codex")],
    credential: CredentialTemplate {
        env: "OPENAI_API_KEY",
        host: "api.openai.com",
        header: "authorization",
        bearer: true,
        paths: &["/v1/responses"],
        methods: &["POST"],
        placeholder_prefix: "sk-proj-",
        base_url_env: "OPENAI_BASE_URL",
        base_url_path: "/v1",
    },
    cheapest: "gpt-6-luna",
    stream: StreamKind::CodexJson,
};

/// aider 0.86.2, measured in its image against the stand-in: it sends no tools (the edits come
/// as text in its edit format, applied and auto-committed by aider; `--yes-always` does NOT
/// run the shell commands a reply suggests: aider asks those with "explicit yes required"),
/// one `POST /v1/chat/completions` per reply plus one for each commit message. Before the
/// exec: a fresh non-empty model-price cache in `$HOME/.aider/caches` (else aider fetches
/// raw.githubusercontent.com at start, 5 s); the base URL on the command line (a work tree's
/// `.env` is loaded with override and could replace `OPENAI_API_BASE`; a flag wins over both);
/// no `.gitignore` edit, no repo map (its tags cache would land in /work), histories in /tmp.
/// aider reads `.env` (with override) and `.aider.conf.yml` from the git root: measured, a
/// planted `AIDER_AUTO_COMMITS=false` and `lint-cmd:` took effect in the next run. So the
/// wrapper refuses to start (exit 2, naming the file) when the work tree holds one of them.
const AIDER_SCRIPT: &str = concat!(
    "for f in .env .aider.conf.yml .aider.model.settings.yml .aider.model.metadata.json; do ",
    "if [ -e \"$f\" ] || [ -L \"$f\" ]; then echo \"cyclix: refusing to start aider: $PWD/$f ",
    "would configure it (aider loads it from the work tree); remove it from the repository or ",
    "set agent.command\" >&2; exit 2; fi; done; ",
    "mkdir -p \"$HOME/.aider/caches\" /tmp/.aider && printf '{\"cyclix-offline\": {}}\\n' ",
    "> \"$HOME/.aider/caches/model_prices_and_context_window.json\" && exec aider ",
    "--openai-api-base \"$OPENAI_API_BASE\" --yes-always --no-check-update --no-analytics ",
    "--no-show-model-warnings --no-pretty --no-stream --no-fancy-input --no-detect-urls ",
    "--no-gitignore --map-tokens 0 --chat-history-file /tmp/.aider/chat.history.md ",
    "--input-history-file /tmp/.aider/input.history --no-restore-chat-history \"$@\""
);

const AIDER: Preset = Preset {
    name: "aider",
    package: "pypi aider-chat@0.86.2",
    image: "localhost/cyclix-agent-aider:0.86.2",
    uid: AGENT_UID,
    argv: &["sh", "-c", AIDER_SCRIPT, "aider"],
    model_flag: "--model",
    max_turns_flag: None,
    argv_tail: &[],
    task_input: TaskInput::FileFlag("--message-file"),
    env: &[
        ("LITELLM_LOCAL_MODEL_COST_MAP", "True"),
        ("AIDER_ANALYTICS_DISABLE", "true"),
    ],
    credential: CredentialTemplate {
        env: "OPENAI_API_KEY",
        host: "api.openai.com",
        header: "authorization",
        bearer: true,
        paths: &["/v1/chat/completions"],
        methods: &["POST"],
        placeholder_prefix: "sk-proj-",
        base_url_env: "OPENAI_API_BASE",
        base_url_path: "/v1",
    },
    cheapest: "openai/gpt-5-mini",
    stream: StreamKind::PlainText,
};

/// Gemini CLI 0.61.0, measured against the stand-in: the prompt on stdin (no `-p` needed),
/// `--yolo` approves its tools, `--output-format stream-json`; the auth type `gemini-api-key`
/// comes from the image's system settings (`/etc/gemini-cli/settings.json`: without it a set
/// `GOOGLE_GEMINI_BASE_URL` selects "gateway", which headless mode refuses). Plain
/// `http://PROXY:PORT` is accepted as base URL; the key goes as `x-goog-api-key` to
/// `POST /v1beta/models/M:streamGenerateContent?alt=sse` and nothing else is sent. Without
/// `GEMINI_CLI_TRUST_WORKSPACE` the work tree is untrusted and `--yolo` falls back to asking.
/// A refused key (403) fails after one request, exit 147, in seconds. A trusted work tree's
/// `.gemini/settings.json` and `.gemini/.env` configure the CLI (measured: a planted
/// `tools.exclude` and a planted `GEMINI_CLI_CUSTOM_HEADERS` both took effect; the system
/// settings win only for the keys they set), so the wrapper refuses to start (exit 2, naming
/// the file) when the work tree holds one of them.
const GEMINI_SCRIPT: &str = concat!(
    "for f in .gemini/settings.json .gemini/.env; do ",
    "if [ -e \"$f\" ] || [ -L \"$f\" ]; then echo \"cyclix: refusing to start gemini: $PWD/$f ",
    "would configure it (Gemini CLI loads it from a trusted work tree); remove it from the ",
    "repository or set agent.command\" >&2; exit 2; fi; done; ",
    "exec gemini --yolo --output-format stream-json \"$@\""
);

const GEMINI_CLI: Preset = Preset {
    name: "gemini-cli",
    package: "npm @google/gemini-cli@0.61.0",
    image: "localhost/cyclix-agent-gemini-cli:0.61.0",
    uid: AGENT_UID,
    argv: &["sh", "-c", GEMINI_SCRIPT, "gemini"],
    model_flag: "--model",
    max_turns_flag: None,
    argv_tail: &[],
    task_input: TaskInput::Stdin,
    env: &[
        ("GEMINI_CLI_NO_RELAUNCH", "true"),
        ("GEMINI_CLI_TRUST_WORKSPACE", "true"),
        ("GEMINI_CLI_HOME", "/tmp"),
        // Its shell tool sets GIT_CONFIG_SYSTEM=/dev/null, so the image's /etc/gitconfig
        // identity is lost and `git commit` fails ("Author identity unknown"): the same
        // identity as variables, which it passes through.
        ("GIT_AUTHOR_NAME", "cyclix-agent"),
        ("GIT_AUTHOR_EMAIL", "agent@cyclix.invalid"),
        ("GIT_COMMITTER_NAME", "cyclix-agent"),
        ("GIT_COMMITTER_EMAIL", "agent@cyclix.invalid"),
    ],
    credential: CredentialTemplate {
        env: "GEMINI_API_KEY",
        host: "generativelanguage.googleapis.com",
        header: "x-goog-api-key",
        bearer: false,
        paths: &["/v1beta/models/*"],
        methods: &["POST"],
        placeholder_prefix: "AIza",
        base_url_env: "GOOGLE_GEMINI_BASE_URL",
        base_url_path: "",
    },
    cheapest: "gemini-2.5-flash-lite",
    stream: StreamKind::GeminiStreamJson,
};

/// Every CLI preset (not `script`).
const ROWS: &[Preset] = &[CLAUDE_CODE, CODEX, AIDER, GEMINI_CLI];

/// The row of `name`; `None` for `script` and unknown names.
#[must_use]
pub fn find(name: &str) -> Option<&'static Preset> {
    ROWS.iter().find(|p| p.name == name)
}

impl Preset {
    /// The model `agent.model` names: [`CHEAPEST`] becomes the preset's cheapest model;
    /// `None` leaves the CLI's own default.
    #[must_use]
    pub fn model(&self, asked: Option<&str>) -> Option<String> {
        asked.map(|m| {
            if m == CHEAPEST {
                self.cheapest.to_string()
            } else {
                m.to_string()
            }
        })
    }

    /// The CLI's argv: the headless words, `--model M`, the turn cap, the task file flag and
    /// the tail. `max_turns` is dropped for a CLI without a turn flag (the caller records it).
    #[must_use]
    pub fn argv(
        &self,
        model: Option<&str>,
        max_turns: Option<u32>,
        task_path: &str,
    ) -> Vec<String> {
        let mut v: Vec<String> = self.argv.iter().map(|s| (*s).to_string()).collect();
        if let Some(m) = model {
            v.push(self.model_flag.into());
            v.push(m.into());
        }
        if let (Some(flag), Some(n)) = (self.max_turns_flag, max_turns) {
            v.push(flag.into());
            v.push(n.to_string());
        }
        if let TaskInput::FileFlag(flag) = self.task_input {
            v.push(flag.into());
            v.push(task_path.into());
        }
        v.extend(self.argv_tail.iter().map(|s| (*s).to_string()));
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_named_preset_but_script_has_a_row_and_a_pinned_versioned_image() {
        for name in PRESETS {
            let row = find(name);
            assert_eq!(row.is_none(), *name == "script", "{name}");
            if let Some(p) = row {
                let version = p.package.rsplit('@').next().expect("version");
                assert!(p.image.ends_with(&format!(":{version}")), "{}", p.image);
                assert!(
                    p.image.starts_with("localhost/cyclix-agent-"),
                    "{}",
                    p.image
                );
                assert!(p.uid != 0, "{name} runs as a non-root uid");
                assert!(
                    p.env
                        .iter()
                        .all(|(k, v)| !k.contains("KEY") && !v.is_empty()),
                    "{name}: fixed variables are never keys"
                );
            }
        }
    }

    #[test]
    fn the_table_and_the_image_recipes_agree_on_every_tag() {
        for name in ["claude-code", "codex", "gemini-cli", "aider"] {
            assert_eq!(
                crate::images::agents::preset_image(name).as_deref(),
                find(name).map(|p| p.image),
                "{name}"
            );
        }
    }

    #[test]
    fn argv_puts_model_turns_and_task_where_each_cli_reads_them() {
        let c = find("claude-code").expect("row");
        let v = c.argv(Some("m1"), Some(7), "/cyclix/task.md");
        assert_eq!(v[v.len() - 4..], ["--model", "m1", "--max-turns", "7"]);
        let x = find("codex").expect("row");
        let v = x.argv(None, Some(7), "/cyclix/task.md");
        assert_eq!(v.last().map(String::as_str), Some("-"), "stdin prompt last");
        assert!(!v.contains(&"7".to_string()), "codex has no turn flag");
        let a = find("aider").expect("row");
        let v = a.argv(Some("m"), None, "/cyclix/task.md");
        assert_eq!(v[v.len() - 2..], ["--message-file", "/cyclix/task.md"]);
        assert_eq!(c.model(Some(CHEAPEST)).as_deref(), Some(c.cheapest));
        assert_eq!(c.model(Some("x")).as_deref(), Some("x"));
        assert_eq!(c.model(None), None);
    }
}
