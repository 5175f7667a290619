//! A pool's chat-template override (`pools[].chat_template: FILE`), as vLLM's and
//! llama-server's `--chat-template` take it: a Jinja file that replaces the template of the
//! pool's tokenizer, so the gateway renders prompts exactly as an engine started with the
//! same flag does. Read and compiled at load (and every reload); the error names the file.

use std::path::Path;

/// The template text of `path`: a UTF-8 Jinja file.
pub(crate) fn read(path: &Path) -> Result<String, String> {
    let bytes = std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?;
    String::from_utf8(bytes).map_err(|_| format!("{}: is not UTF-8", path.display()))
}

/// Checks the override at `path` with the pool's tokenizer `source`: the file reads and
/// compiles together with that tokenizer. (The pool checks that its engine renders a
/// template at all: `super::pools`.)
pub(crate) fn check(source: &warmpath_text::TokenizerSource, path: &Path) -> Result<(), String> {
    let text = read(path)?;
    let Some(mut loaded) = source.load().map_err(|e| e.to_string())? else {
        return Ok(());
    };
    loaded.spec.chat_template = Some(text);
    warmpath_text::ChatTokenizer::from_spec(&loaded.spec)
        .map(drop)
        .map_err(|e| format!("{}: {e}", path.display()))
}

#[cfg(test)]
mod tests {
    use crate::config::{Config, TokenizerConfig};
    use crate::encoder::PromptEncoder;
    use std::path::PathBuf;
    use warmpath_text::ChatMessage;

    /// A directory with a ChatML `tokenizer.json` (no template of its own) and two
    /// templates: `plain.jinja` and `bad.jinja`.
    fn files() -> PathBuf {
        let dir = std::env::temp_dir().join(format!(
            "warmpath-chat-template-{}-{:?}",
            std::process::id(),
            std::thread::current().id()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        let spec = warmpath_text::bytelevel::chatml_bpe_spec();
        std::fs::write(
            dir.join("tokenizer.json"),
            serde_json::to_vec(&spec.tokenizer).unwrap(),
        )
        .unwrap();
        std::fs::write(
            dir.join("plain.jinja"),
            "{% for m in messages %}[{{ m.role }}] {{ m.content }}\n{% endfor %}\
             {% if add_generation_prompt %}[assistant] {% endif %}",
        )
        .unwrap();
        std::fs::write(dir.join("bad.jinja"), "{% for m in messages %}").unwrap();
        dir
    }

    fn load(dir: &std::path::Path, extra: &str) -> Result<Config, String> {
        let yaml = format!(
            "auth: {{enabled: false}}\npools:\n  - name: p\n    engine: vllm\n    \
             upstreams: [http://127.0.0.1:1]\n    tokenizer: {{hf: {{tokenizer: {}}}}}\n{extra}",
            dir.join("tokenizer.json").display()
        );
        let c = Config::from_yaml(&yaml).map_err(|e| e.to_string())?;
        c.validate().map_err(|e| e.to_string())?;
        Ok(c)
    }

    fn render(c: &Config) -> Result<String, String> {
        let p = &c.pools[0];
        let e = crate::engines::tokenizer::encoder(
            &p.tokenizer,
            p.chat_template.as_deref(),
            &TokenizerConfig::default(),
        )
        .unwrap();
        let PromptEncoder::Tokens(t) = e else {
            panic!("a tokenizer was configured")
        };
        let msgs = [ChatMessage::new("user", "hello there")];
        let ids = t.encode_chat(&msgs).map_err(|e| e.to_string())?;
        t.inner().decode(&ids).map_err(|e| e.to_string())
    }

    #[test]
    fn the_override_replaces_the_tokenizers_template() {
        let dir = files();
        let plain = dir.join("plain.jinja");
        let c = load(&dir, &format!("    chat_template: {}\n", plain.display())).unwrap();
        assert_eq!(render(&c).unwrap(), "[user] hello there\n[assistant] ");
        // Without the override this tokenizer has no template, and renders no chat.
        let without = render(&load(&dir, "").unwrap());
        assert!(without.is_err(), "{without:?}");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_bad_override_is_refused_naming_the_key_and_the_file() {
        let dir = files();
        let missing = dir.join("missing.jinja");
        let bad = dir.join("bad.jinja");
        let cases = [
            (
                format!("    chat_template: {}\n", missing.display()),
                "missing.jinja",
            ),
            (
                format!("    chat_template: {}\n", bad.display()),
                "bad.jinja",
            ),
        ];
        for (extra, file) in cases {
            let err = load(&dir, &extra).unwrap_err();
            assert!(err.contains("pools[0].chat_template"), "{err}");
            assert!(err.contains(file), "{err}");
        }
        let yaml = format!(
            "auth: {{enabled: false}}\npools:\n  - {{name: p, engine: openai, upstreams: \
             [http://127.0.0.1:1], chat_template: {}}}\n",
            dir.join("plain.jinja").display()
        );
        let err = Config::from_yaml(&yaml).unwrap().validate().unwrap_err();
        assert!(err.to_string().contains("pools[0].chat_template"), "{err}");
        assert!(err.to_string().contains("needs a tokenizer"), "{err}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
