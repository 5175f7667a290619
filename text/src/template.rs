//! Chat template rendering with `minijinja`, in the way HF `apply_chat_template` does
//! (`trim_blocks` and `lstrip_blocks` on, `raise_exception` available).

use crate::error::TextError;
use crate::message::ChatMessage;
use minijinja::{context, Environment};

/// A compiled chat template.
pub(crate) struct ChatTemplate {
    env: Environment<'static>,
}

const TEMPLATE_NAME: &str = "chat";

impl ChatTemplate {
    /// Compiles `source`.
    pub(crate) fn new(source: &str) -> Result<Self, TextError> {
        let mut env = Environment::new();
        minijinja_contrib::add_to_environment(&mut env);
        env.set_unknown_method_callback(minijinja_contrib::pycompat::unknown_method_callback);
        env.set_trim_blocks(true);
        env.set_lstrip_blocks(true);
        env.add_function("raise_exception", raise_exception);
        env.add_template_owned(TEMPLATE_NAME.to_string(), source.to_string())
            .map_err(|e| TextError::Template(e.to_string()))?;
        Ok(Self { env })
    }

    /// Renders `messages`, appending the assistant prefix when `add_generation_prompt`.
    pub(crate) fn render(
        &self,
        messages: &[ChatMessage],
        add_generation_prompt: bool,
        bos_token: Option<&str>,
        eos_token: Option<&str>,
    ) -> Result<String, TextError> {
        let tmpl = self
            .env
            .get_template(TEMPLATE_NAME)
            .map_err(|e| TextError::Template(e.to_string()))?;
        tmpl.render(context! {
            messages => messages,
            add_generation_prompt => add_generation_prompt,
            bos_token => bos_token.unwrap_or(""),
            eos_token => eos_token.unwrap_or(""),
        })
        .map_err(|e| TextError::Template(e.to_string()))
    }
}

fn raise_exception(msg: String) -> Result<String, minijinja::Error> {
    Err(minijinja::Error::new(
        minijinja::ErrorKind::InvalidOperation,
        msg,
    ))
}
