//! Renders the same conversations as `apply_chat_template(tokenize=False)` did with Jinja2
//! (`testdata/tokenizers/reference/*.json`) and compares the text.

use serde_json::{Map, Value, json};

use super::{ChatTemplate, RenderOptions, patch_source};
use crate::Tokenizer;
use crate::testutil::{EXTRA_TOKENIZERS, extra_tokenizer, qwen3, testdata};

fn check_renders(tok: &Tokenizer, name: &str) -> usize {
    let path = testdata().join(format!("tokenizers/reference/{name}.json"));
    let r: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let renders = r["renders"].as_array().unwrap();
    let Some(tpl) = tok.chat_template() else {
        assert!(renders.is_empty(), "{name}: transformers found a template servebench did not");
        eprintln!("note: {name} ships no chat template; its rendering checks are skipped");
        return 0;
    };
    for case in renders {
        let kwargs: Option<Map<String, Value>> = case.get("kwargs").and_then(Value::as_object).cloned();
        let opts = RenderOptions {
            add_generation_prompt: case["add_generation_prompt"].as_bool().unwrap(),
            tools: case.get("tools"),
            kwargs: kwargs.as_ref(),
        };
        let got = tpl.render(&case["messages"], &opts);
        match case["rendered"].as_str() {
            Some(want) => assert_eq!(got.unwrap(), want, "{name}: {case}"),
            None => assert!(got.is_err(), "{name}: Jinja2 raised but servebench rendered {got:?}"),
        }
    }
    renders.len()
}

#[test]
fn qwen3_renders_like_jinja2() {
    assert_eq!(check_renders(qwen3(), "qwen3"), 14);
}

#[test]
fn extra_templates_render_like_jinja2() {
    for name in EXTRA_TOKENIZERS {
        if let Some(tok) = extra_tokenizer(name) {
            check_renders(tok, name);
        }
    }
}

fn tpl(src: &str) -> ChatTemplate {
    ChatTemplate::new(src, "test", &[("bos_token".into(), "<s>".into())]).unwrap()
}

#[test]
fn raise_exception_becomes_a_render_error_with_its_message() {
    let t = tpl("{% if messages|length > 1 %}{{ raise_exception('Roles must alternate') }}{% endif %}ok");
    assert_eq!(t.render(&json!([{"role": "user", "content": "x"}]), &RenderOptions::default()).unwrap(), "ok");
    let err = t
        .render(&json!([{"role": "user", "content": "x"}, {"role": "user", "content": "y"}]), &RenderOptions::default())
        .unwrap_err()
        .to_string();
    assert!(err.contains("Roles must alternate"), "{err}");
    assert!(err.contains("test"), "{err}");
}

#[test]
fn tojson_is_json_dumps_without_html_escaping() {
    let t =
        tpl("{{ messages[0] | tojson }}|{{ messages[0] | tojson(indent=2) }}|{{ 'é<&>' | tojson(ensure_ascii=true) }}");
    let out = t.render(&json!([{"role": "user", "content": "<a & 'b'> é"}]), &RenderOptions::default()).unwrap();
    assert_eq!(
        out,
        "{\"role\": \"user\", \"content\": \"<a & 'b'> é\"}|{\n  \"role\": \"user\",\n  \"content\": \"<a & 'b'> é\"\n}|\"\\u00e9<&>\""
    );
}

#[test]
fn python_printing_and_methods_and_special_tokens() {
    let t = tpl(
        "{{ bos_token }}{{ none }}{{ true }}{{ add_generation_prompt }} {{ '  x y '.strip().split(' ') | join(',') }} {{ 'abc'.startswith('a') }}{{ tools }}",
    );
    let out = t.render(&json!([]), &RenderOptions { add_generation_prompt: true, ..Default::default() }).unwrap();
    assert_eq!(out, "<s>NoneTrueTrue x,y TrueNone");
}

#[test]
fn trim_and_lstrip_blocks_are_on_and_the_last_newline_is_dropped() {
    let t = tpl("{% for m in messages %}\n  {% if true %}\n[{{ m.content }}]\n  {% endif %}\n{% endfor %}\n");
    let out = t.render(&json!([{"content": "a"}, {"content": "b"}]), &RenderOptions::default()).unwrap();
    assert_eq!(out, "[a]\n[b]\n");
}

#[test]
fn generation_tags_are_stripped_and_reverse_slices_work() {
    assert_eq!(patch_source("a{% generation %}b{%- endgeneration -%}c"), "abc");
    let t = tpl("{% for m in messages[::-1] %}{% generation %}{{ m }}{% endgeneration %}{% endfor %}");
    assert_eq!(t.render(&json!([1, 2, 3]), &RenderOptions::default()).unwrap(), "321");
}

#[test]
fn strftime_now_formats_the_current_date() {
    let t = tpl("{{ strftime_now('%Y') }}");
    let year: i32 = t.render(&json!([]), &RenderOptions::default()).unwrap().parse().unwrap();
    assert!(year >= 2024);
}

#[test]
fn a_template_that_does_not_compile_says_where_it_came_from() {
    let err = ChatTemplate::new("{% for %}", "my/chat_template.jinja", &[]).unwrap_err().to_string();
    assert!(err.contains("my/chat_template.jinja"), "{err}");
    assert!(err.contains("--skip-chat-template"), "{err}");
}

#[test]
fn render_user_adds_the_generation_prompt() {
    let out = qwen3().require_chat_template().unwrap().render_user("Hi").unwrap();
    assert_eq!(out, "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
}
