//! Chat template rendering with `minijinja`, as Hugging Face `apply_chat_template` renders
//! with Jinja2: `trim_blocks` and `lstrip_blocks` on, loop controls, `raise_exception`,
//! `strftime_now`, HF's `tojson` (Python `json.dumps`), values printed as Python prints
//! them, and `continue_final_message` cut the way HF cuts it.

use crate::chat_input::ChatInput;
use crate::error::TextError;
use minijinja::{Environment, Value};

/// A compiled chat template.
pub(crate) struct ChatTemplate {
    env: Environment<'static>,
}

const TEMPLATE_NAME: &str = "chat";

/// What HF appends to the final message's text to find where it ends in the prompt.
const CONTINUE_TAG: &str = "CONTINUE_FINAL_MESSAGE_TAG ";

impl ChatTemplate {
    /// Compiles `source`.
    pub(crate) fn new(source: &str) -> Result<Self, TextError> {
        let mut env = Environment::new();
        minijinja_contrib::add_to_environment(&mut env);
        env.set_unknown_method_callback(minijinja_contrib::pycompat::unknown_method_callback);
        env.set_trim_blocks(true);
        env.set_lstrip_blocks(true);
        env.set_formatter(crate::py_repr::format);
        env.add_function("raise_exception", raise_exception);
        env.add_function("strftime_now", crate::strftime::strftime_now);
        env.add_filter("tojson", crate::hf_json::tojson);
        env.add_template_owned(TEMPLATE_NAME.to_string(), source.to_string())
            .map_err(|e| TextError::Template(e.to_string()))?;
        Ok(Self { env })
    }

    /// Renders `input` (whose strings the caller may have escaped), with `bos_token` and
    /// `eos_token` defined and the request's `chat_template_kwargs` over them.
    pub(crate) fn render(
        &self,
        input: &ChatInput,
        bos_token: Option<&str>,
        eos_token: Option<&str>,
    ) -> Result<String, TextError> {
        let tmpl = self
            .env
            .get_template(TEMPLATE_NAME)
            .map_err(|e| TextError::Template(e.to_string()))?;
        let mut messages = input.messages.clone();
        let mut final_text = None;
        if input.continue_final_message {
            let last = messages.pop().ok_or_else(|| {
                TextError::Template("continue_final_message needs a final message".into())
            })?;
            let content = last
                .get_attr("content")
                .ok()
                .and_then(|c| c.as_str().map(str::to_string))
                .unwrap_or_default();
            let mut map = crate::pairs::Pairs::new();
            for k in last.try_iter().into_iter().flatten() {
                let v = last.get_item(&k).unwrap_or_default();
                map.insert(k, v);
            }
            map.insert(
                Value::from("content"),
                Value::from(format!("{content}{CONTINUE_TAG}")),
            );
            messages.push(map.into_value());
            final_text = Some(content);
        }
        let mut ctx: Vec<(String, Value)> = vec![
            ("messages".into(), Value::from(messages)),
            (
                "tools".into(),
                input.tools.clone().unwrap_or(Value::from(())),
            ),
            (
                "documents".into(),
                input.documents.clone().unwrap_or(Value::from(())),
            ),
            (
                "add_generation_prompt".into(),
                Value::from(input.add_generation_prompt),
            ),
            ("bos_token".into(), Value::from(bos_token.unwrap_or(""))),
            ("eos_token".into(), Value::from(eos_token.unwrap_or(""))),
        ];
        for (k, v) in &input.kwargs {
            ctx.retain(|(name, _)| name != k);
            ctx.push((k.clone(), v.clone()));
        }
        let rendered = tmpl
            .render(Value::from_iter(ctx))
            .map_err(|e| TextError::Template(e.to_string()))?;
        match final_text {
            None => Ok(rendered),
            Some(text) => cut_at_continue_tag(rendered, &text),
        }
    }
}

/// HF's cut: the prompt ends where the final message's text ended.
fn cut_at_continue_tag(rendered: String, final_text: &str) -> Result<String, TextError> {
    let tag = CONTINUE_TAG.trim();
    let (Some(at), true) = (rendered.rfind(tag), rendered.contains(final_text.trim())) else {
        return Err(TextError::Template(
            "continue_final_message is set but the final message does not appear in the \
             rendered chat"
                .into(),
        ));
    };
    if rendered[at..].starts_with(CONTINUE_TAG) {
        Ok(rendered[..at].to_string())
    } else {
        Ok(rendered[..at].trim_end().to_string())
    }
}

fn raise_exception(msg: String) -> Result<String, minijinja::Error> {
    Err(minijinja::Error::new(
        minijinja::ErrorKind::InvalidOperation,
        msg,
    ))
}
