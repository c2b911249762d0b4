//! Chat templates rendered with minijinja the way the Hugging Face stack renders them with
//! Jinja2: `trim_blocks` + `lstrip_blocks`, `raise_exception`, `strftime_now`, Python string
//! and dict methods, a `tojson` that is `json.dumps`, Python-style printing of `None`/booleans,
//! the special tokens from the tokenizer config, and the source patches real templates need.

use minijinja::value::{Kwargs, Value as JValue, ValueKind};
use minijinja::{Environment, Error, ErrorKind, State};
use serde_json::{Map, Value};
use servebench_core::pyjson;

/// A chat template failed to compile or render.
#[derive(Clone, Debug, thiserror::Error)]
pub enum TemplateError {
    #[error(
        "the chat template from {origin} does not compile: {message}; pass a fixed template file, or skip templating (--skip-chat-template)"
    )]
    Compile { origin: String, message: String },
    #[error("the chat template from {origin} failed: {message}; check the messages it was given, or fix the template")]
    Render { origin: String, message: String },
}

/// Options for one rendering (`apply_chat_template(..., tokenize=False)`).
#[derive(Clone, Copy, Debug, Default)]
pub struct RenderOptions<'a> {
    /// Append the assistant header so the model answers.
    pub add_generation_prompt: bool,
    /// Tool schemas (`tools=`), a JSON array.
    pub tools: Option<&'a Value>,
    /// Extra template variables (`--chat-template-kwargs`, e.g. `enable_thinking`).
    pub kwargs: Option<&'a Map<String, Value>>,
}

/// A compiled chat template with the tokenizer's special tokens.
pub struct ChatTemplate {
    env: Environment<'static>,
    origin: String,
    special: Vec<(String, String)>,
}

impl std::fmt::Debug for ChatTemplate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChatTemplate").field("origin", &self.origin).finish_non_exhaustive()
    }
}

const NAME: &str = "chat_template";

/// Rewrites constructs Jinja2 accepts but minijinja does not.
pub fn patch_source(src: &str) -> String {
    let mut s = src.to_string();
    // `{% generation %}` marks assistant spans for training masks; it renders nothing.
    for tag in ["generation", "endgeneration"] {
        for (open, close) in [("{%", "%}"), ("{%-", "%}"), ("{%", "-%}"), ("{%-", "-%}")] {
            s = s.replace(&format!("{open} {tag} {close}"), "");
        }
    }
    s
}

fn raise_exception(msg: String) -> Result<JValue, Error> {
    Err(Error::new(ErrorKind::InvalidOperation, msg))
}

fn strftime_now(fmt: String) -> Result<String, Error> {
    let now = jiff::Zoned::now();
    jiff::fmt::strtime::format(fmt.as_bytes(), &now)
        .map_err(|e| Error::new(ErrorKind::InvalidOperation, format!("strftime_now: {e}")))
}

/// Jinja2's `tojson` as Hugging Face overrides it: `json.dumps(x, ensure_ascii=False, ...)`.
fn tojson(value: JValue, kwargs: Kwargs) -> Result<JValue, Error> {
    let indent: Option<usize> = kwargs.get("indent")?;
    let ensure_ascii: Option<bool> = kwargs.get("ensure_ascii")?;
    let sort_keys: Option<bool> = kwargs.get("sort_keys")?;
    let separators: Option<Vec<String>> = kwargs.get("separators")?;
    kwargs.assert_all_used()?;
    let json =
        serde_json::to_value(&value).map_err(|e| Error::new(ErrorKind::InvalidOperation, format!("tojson: {e}")))?;
    let mut style = pyjson::Style::with_indent(indent, ensure_ascii.unwrap_or(false));
    style.sort_keys = sort_keys.unwrap_or(false);
    if let Some([item, key]) = separators.as_deref() {
        style.item_separator = item.clone();
        style.key_separator = key.clone();
    }
    Ok(JValue::from_safe_string(pyjson::dumps_with(&json, &style)))
}

/// Prints values as Python's `str()` would: `None`, `True`, `False`.
fn python_formatter(out: &mut minijinja::Output, state: &State, value: &JValue) -> Result<(), Error> {
    match value.kind() {
        ValueKind::None => out.write_str("None").map_err(Error::from),
        ValueKind::Bool => out.write_str(if value.is_true() { "True" } else { "False" }).map_err(Error::from),
        _ => minijinja::escape_formatter(out, state, value),
    }
}

impl ChatTemplate {
    /// Compiles `source`; `origin` names where it came from (for errors) and `special` holds
    /// `(name, token)` pairs such as `("bos_token", "<s>")` made available to the template.
    pub fn new(source: &str, origin: &str, special: &[(String, String)]) -> Result<Self, TemplateError> {
        let mut env = Environment::new();
        env.set_trim_blocks(true);
        env.set_lstrip_blocks(true);
        env.set_keep_trailing_newline(false);
        env.set_unknown_method_callback(minijinja_contrib::pycompat::unknown_method_callback);
        env.set_formatter(python_formatter);
        env.add_function("raise_exception", raise_exception);
        env.add_function("strftime_now", strftime_now);
        env.add_filter("tojson", tojson);
        env.add_template_owned(NAME, patch_source(source))
            .map_err(|e| TemplateError::Compile { origin: origin.to_string(), message: error_text(&e) })?;
        Ok(ChatTemplate { env, origin: origin.to_string(), special: special.to_vec() })
    }

    /// Where the template came from.
    pub fn origin(&self) -> &str {
        &self.origin
    }

    /// Renders a conversation (`messages`: a JSON array of `{role, content}`).
    pub fn render(&self, messages: &Value, opts: &RenderOptions<'_>) -> Result<String, TemplateError> {
        let mut ctx = Map::new();
        for (k, v) in &self.special {
            ctx.insert(k.clone(), Value::String(v.clone()));
        }
        if let Some(kw) = opts.kwargs {
            for (k, v) in kw {
                ctx.insert(k.clone(), v.clone());
            }
        }
        ctx.insert("messages".into(), messages.clone());
        ctx.insert("tools".into(), opts.tools.cloned().unwrap_or(Value::Null));
        ctx.insert("documents".into(), Value::Null);
        ctx.insert("add_generation_prompt".into(), Value::Bool(opts.add_generation_prompt));
        let tmpl = self.env.get_template(NAME).map_err(|e| self.render_error(&e))?;
        tmpl.render(JValue::from_serialize(&ctx)).map_err(|e| self.render_error(&e))
    }

    /// One user message with the generation prompt: what vLLM's custom dataset renders.
    pub fn render_user(&self, prompt: &str) -> Result<String, TemplateError> {
        self.render_user_with(prompt, None)
    }

    /// [`ChatTemplate::render_user`] with extra template variables (`--chat-template-kwargs`).
    pub fn render_user_with(&self, prompt: &str, kwargs: Option<&Map<String, Value>>) -> Result<String, TemplateError> {
        let messages = serde_json::json!([{"role": "user", "content": prompt}]);
        self.render(&messages, &RenderOptions { add_generation_prompt: true, tools: None, kwargs })
    }

    fn render_error(&self, e: &Error) -> TemplateError {
        TemplateError::Render { origin: self.origin.clone(), message: error_text(e) }
    }
}

/// An error's message with its causes, without minijinja's debug dump.
fn error_text(e: &Error) -> String {
    let mut msg = match e.detail() {
        Some(d) if e.kind() == ErrorKind::InvalidOperation => d.to_string(),
        _ => e.to_string(),
    };
    let mut src = std::error::Error::source(e);
    while let Some(s) = src {
        msg.push_str(": ");
        msg.push_str(&s.to_string());
        src = s.source();
    }
    msg
}

#[cfg(test)]
mod tests;
