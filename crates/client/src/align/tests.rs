//! The alignment against in-memory servers whose tokenizers are known (the committed Qwen3 one,
//! or a word-piece one that disagrees with it), and its HTTP calls against the scripted test
//! server and a closed port.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, OnceLock};

use serde_json::json;
use servebench_core::config::{Backend, RangeRatio};
use servebench_workload::{build_plan, prompt_tokens};

use super::*;
use crate::testserver::{Script, TestServer, TestServerConfig};

fn qwen3() -> &'static Tokenizer {
    static TOK: OnceLock<Tokenizer> = OnceLock::new();
    TOK.get_or_init(|| {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../../testdata/tokenizers/qwen3");
        Tokenizer::load(dir).expect("the committed Qwen3 tokenizer loads")
    })
}

/// How the in-memory server tokenizes.
#[derive(Clone, Copy)]
enum Vocab {
    /// The committed Qwen3 tokenizer (chat prompts through its template).
    Qwen3,
    /// One token per whitespace-separated word, two for a word of more than `long` characters
    /// (split in half), a `<s>` first when special tokens are added and `bos` is set, and three
    /// more for a chat prompt.
    Words { long: usize, bos: bool },
}

/// An in-memory `/tokenize` and `/detokenize` that counts the calls in flight.
struct Fake {
    vocab: Vocab,
    /// Word-piece ids: the index of the piece here.
    pieces: Mutex<Vec<String>>,
    /// `/tokenize` fails for prompts containing this.
    fail_on: Option<&'static str>,
    detokenize: bool,
    in_flight: AtomicUsize,
    max_in_flight: AtomicUsize,
}

impl Fake {
    fn new(vocab: Vocab) -> Self {
        Fake {
            vocab,
            pieces: Mutex::new(vec!["<s>".to_string()]),
            fail_on: None,
            detokenize: true,
            in_flight: AtomicUsize::new(0),
            max_in_flight: AtomicUsize::new(0),
        }
    }

    fn ids(&self, text: &str, special: bool) -> Vec<u32> {
        match self.vocab {
            Vocab::Qwen3 => qwen3().encode(text, special).unwrap(),
            Vocab::Words { long, bos } => {
                let mut pieces = self.pieces.lock().unwrap();
                let mut id = |p: String| match pieces.iter().position(|q| *q == p) {
                    Some(i) => i as u32,
                    None => {
                        pieces.push(p);
                        (pieces.len() - 1) as u32
                    }
                };
                let mut out = if special && bos { vec![0] } else { Vec::new() };
                for w in text.split_whitespace() {
                    let chars = w.chars().count();
                    if chars > long {
                        let mid = w.char_indices().nth(chars / 2).map_or(w.len(), |(i, _)| i);
                        out.push(id(format!(" {}", &w[..mid])));
                        out.push(id(w[mid..].to_string()));
                    } else {
                        out.push(id(format!(" {w}")));
                    }
                }
                out
            }
        }
    }

    fn text(&self, ids: &[u32]) -> String {
        match self.vocab {
            Vocab::Qwen3 => qwen3().decode(ids).unwrap(),
            Vocab::Words { .. } => {
                let pieces = self.pieces.lock().unwrap();
                ids.iter().filter(|&&i| i != 0).map(|&i| pieces[i as usize].as_str()).collect()
            }
        }
    }

    fn count(&self, text: &str) -> usize {
        self.ids(text, false).len()
    }

    async fn call<T>(&self, f: impl FnOnce() -> Result<T, AlignError>) -> Result<T, AlignError> {
        let now = self.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
        self.max_in_flight.fetch_max(now, Ordering::SeqCst);
        tokio::task::yield_now().await;
        tokio::task::yield_now().await;
        let r = f();
        self.in_flight.fetch_sub(1, Ordering::SeqCst);
        r
    }
}

fn not_found(path: &str) -> AlignError {
    AlignError::Status { url: format!("http://fake{path}"), status: StatusCode::NOT_FOUND }
}

impl TokenServer for Fake {
    async fn tokenize(&self, prompt: &str, add_special_tokens: bool) -> Result<Vec<u32>, AlignError> {
        self.call(|| match self.fail_on {
            Some(bad) if prompt.contains(bad) => Err(not_found("/tokenize")),
            _ => Ok(self.ids(prompt, add_special_tokens)),
        })
        .await
    }

    async fn tokenize_chat(&self, messages: &Value) -> Result<usize, AlignError> {
        let text = messages[0]["content"][0]["text"].as_str().unwrap_or_default().to_string();
        self.call(|| {
            Ok(match self.vocab {
                Vocab::Qwen3 => prompt_tokens(qwen3(), Api::Chat, &text).unwrap() as usize,
                Vocab::Words { .. } => self.count(&text) + 3,
            })
        })
        .await
    }

    async fn detokenize(&self, tokens: &[u32]) -> Result<String, AlignError> {
        self.call(|| if self.detokenize { Ok(self.text(tokens)) } else { Err(not_found("/detokenize")) }).await
    }
}

fn config(backend: Backend, n: usize, input_len: u32) -> RunConfig {
    let mut c = RunConfig::for_target("http://127.0.0.1:9", "m");
    c.target.backend = backend;
    c.target.endpoint = backend.default_endpoint().to_string();
    c.workload = WorkloadSpec::Random {
        input_len,
        output_len: 4,
        range_ratio: RangeRatio { input: 0.0, output: 0.0 },
        prefix_len: 0,
        media: None,
        batch_size: 1,
    };
    c.traffic.num_prompts = n;
    c
}

/// Runs the alignment; returns its outcome and what it logged.
async fn align(
    fake: Fake,
    plan: &mut Plan,
    c: &RunConfig,
    tok: Option<&Tokenizer>,
) -> (Alignment, Vec<String>, Arc<Fake>) {
    let lines = Arc::new(Mutex::new(Vec::new()));
    let sink = Arc::clone(&lines);
    let log: Logger = Arc::new(move |l: &str| sink.lock().unwrap().push(l.to_string()));
    let fake = Arc::new(fake);
    let outcome = align_with(Arc::clone(&fake), plan, c, tok, &log).await;
    let logged = lines.lock().unwrap().clone();
    (outcome, logged, fake)
}

fn texts(plan: &Plan, c: &RunConfig) -> Vec<String> {
    let bodies = BodyBuilder::new(c);
    (0..plan.requests.len()).map(|i| plan.prompt_text(i, &bodies).expect("a prompt body")).collect()
}

/// Gives request `i` a new prompt, keeping its planned count.
fn replace_prompt(plan: &mut Plan, c: &RunConfig, i: usize, prompt: String) {
    let edit = PromptEdit { position: i, prompt, prompt_tokens: plan.requests[i].prompt_tokens };
    plan.rewrite_prompts(&BodyBuilder::new(c), &[edit]).unwrap();
}

#[tokio::test]
async fn without_a_tokenizer_every_prompt_gets_its_planned_length_and_the_servers_counts() {
    let c = config(Backend::Vllm, 200, 30);
    let mut plan = build_plan(&c, None).unwrap();
    // One prompt too short, one far too long, whatever the words.
    let t = texts(&plan, &c);
    replace_prompt(&mut plan, &c, 3, t[3].split(' ').take(11).collect::<Vec<_>>().join(" "));
    replace_prompt(&mut plan, &c, 5, format!("{} extraordinarily {}", t[5], t[5]));
    let before = plan.clone();
    let vocab = Vocab::Words { long: 10, bos: false };
    let probe = Fake::new(vocab);
    let target = 30;
    let exact_before: Vec<bool> = texts(&before, &c).iter().map(|t| probe.count(t) == target).collect();
    assert!(exact_before.iter().any(|e| *e) && exact_before.iter().any(|e| !*e));

    let (outcome, log, fake) = align(Fake::new(vocab), &mut plan, &c, None).await;

    let changed = exact_before.iter().filter(|e| !**e).count();
    assert_eq!(outcome, Alignment::Fitted { changed, off: 0, uncounted: 0 });
    for (i, text) in texts(&plan, &c).iter().enumerate() {
        assert_eq!(fake.count(text), target, "request {i}: {text:?}");
        assert_eq!(plan.requests[i].prompt_tokens, 30, "the server's count");
        if exact_before[i] {
            assert_eq!(plan.requests[i].body, before.requests[i].body, "request {i} needed no change");
        }
        assert_eq!((plan.requests[i].at_ns, plan.requests[i].max_tokens), (before.requests[i].at_ns, 4));
    }
    assert_eq!(plan.token_counting, TokenCounting::Server { base_url: "http://127.0.0.1:9".into() });
    assert!(!plan.notes.iter().any(|n| n == ESTIMATE_NOTE), "{:?}", plan.notes);
    let note = plan.notes.last().unwrap();
    assert_eq!(
        note,
        &format!(
            "Prompt lengths aligned to the server's tokenizer (http://127.0.0.1:9/tokenize): {changed} of 200 \
             prompts adjusted; prompt token counts are the server's, exact."
        )
    );
    assert_eq!(log.last(), Some(note));
    let first = probe.count(&texts(&before, &c)[0]);
    if first != target {
        assert_eq!(
            log[0],
            format!("WARNING: tokenizer mismatch (server={first}, expected={target}), re-aligning prompts.")
        );
    }
    assert_eq!(fake.max_in_flight.load(Ordering::SeqCst), DEFAULT_CONCURRENCY, "without --max-concurrency, a few");
}

#[tokio::test]
async fn calls_in_flight_follow_the_runs_concurrency_up_to_vllms_64() {
    for (max, expected) in [(Some(3), 3), (Some(1000), CONCURRENCY)] {
        let mut c = config(Backend::Vllm, 150, 30);
        c.traffic.max_concurrency = max;
        let mut plan = build_plan(&c, None).unwrap();
        let (_, _, fake) = align(Fake::new(Vocab::Words { long: 4, bos: false }), &mut plan, &c, None).await;
        assert_eq!(fake.max_in_flight.load(Ordering::SeqCst), expected, "--max-concurrency {max:?}");
    }
}

#[tokio::test]
async fn chat_prompts_count_the_servers_template() {
    let c = config(Backend::OpenaiChat, 6, 20);
    let mut plan = build_plan(&c, None).unwrap();
    let t = texts(&plan, &c);
    replace_prompt(&mut plan, &c, 1, format!("{} antidisestablishmentarianism", t[1]));
    let before = plan.clone();
    let (outcome, log, _) = align(Fake::new(Vocab::Qwen3), &mut plan, &c, None).await;
    assert_eq!(outcome, Alignment::Fitted { changed: 1, off: 0, uncounted: 0 });
    assert_eq!(log.len(), 1, "request 0 agreed: only the summary is printed: {log:?}");
    for (i, text) in texts(&plan, &c).iter().enumerate() {
        assert_eq!(qwen3().count(text, false).unwrap(), 20, "request {i}");
        assert_eq!(plan.requests[i].prompt_tokens, prompt_tokens(qwen3(), Api::Chat, text).unwrap());
        if i != 1 {
            assert_eq!(plan.requests[i].body, before.requests[i].body);
        }
    }
    assert!(plan.tokens_exact());
}

#[tokio::test]
async fn a_server_without_tokenize_changes_nothing() {
    let c = config(Backend::Vllm, 5, 8);
    let mut plan = build_plan(&c, None).unwrap();
    let before = plan.clone();
    let fake = Fake { fail_on: Some(""), ..Fake::new(Vocab::Qwen3) };
    let (outcome, log, _) = align(fake, &mut plan, &c, None).await;
    assert_eq!(outcome, Alignment::Unavailable);
    assert_eq!(log, ["WARNING: /tokenize unavailable (404 Not Found), skipping alignment."]);
    assert_eq!(plan, before);
}

#[tokio::test]
async fn prompts_the_server_could_not_count_keep_the_counts_estimates() {
    let c = config(Backend::Vllm, 8, 12);
    let mut plan = build_plan(&c, None).unwrap();
    let t = texts(&plan, &c);
    replace_prompt(&mut plan, &c, 2, format!("{} zzfail", t[2]));
    let before = plan.clone();
    let fake = Fake { fail_on: Some("zzfail"), detokenize: false, ..Fake::new(Vocab::Words { long: 6, bos: true }) };
    let (outcome, log, fake) = align(fake, &mut plan, &c, None).await;
    let Alignment::Fitted { uncounted: 1, off, .. } = outcome else { panic!("{outcome:?}") };
    assert_eq!(plan.requests[2], before.requests[2], "the uncounted prompt is kept");
    // Random prompts leave room for the `<s>` the server adds, as vLLM's do: 11 words and the
    // `<s>` are the 12 tokens asked for. Without /detokenize, the 12 words cannot be cut, so
    // the prompts keep the length the server counts, and their count says so.
    for (i, text) in texts(&plan, &c).iter().enumerate().filter(|(i, _)| *i != 2) {
        let n = fake.count(text);
        assert!(n >= 12, "request {i}: {n}");
        assert_eq!(plan.requests[i].prompt_tokens as usize, n + 1);
        assert_eq!(plan.requests[i].body, before.requests[i].body);
    }
    assert_eq!(off, 7);
    assert_eq!(plan.token_counting, TokenCounting::Estimate);
    assert!(plan.notes.iter().any(|n| n == ESTIMATE_NOTE));
    assert!(log.last().unwrap().ends_with("the server did not count 1, so prompt token counts stay estimates."));
}

#[tokio::test]
async fn with_a_local_tokenizer_vllms_alignment_is_applied() {
    let c = config(Backend::Vllm, 12, 24);
    let mut plan = build_plan(&c, Some(qwen3())).unwrap();
    let before = plan.clone();

    // The same tokenizer: request 0 agrees and nothing else is asked.
    let (outcome, log, fake) = align(Fake::new(Vocab::Qwen3), &mut plan, &c, Some(qwen3())).await;
    assert_eq!((outcome, log.len(), fake.max_in_flight.load(Ordering::SeqCst)), (Alignment::Agreed, 0, 1));
    assert_eq!(plan, before);

    // Another one: prompts the server counts longer are cut to the planned length.
    let (outcome, log, fake) =
        align(Fake::new(Vocab::Words { long: 3, bos: false }), &mut plan, &c, Some(qwen3())).await;
    let old = texts(&before, &c);
    let expected = qwen3().count(&old[0], false).unwrap();
    assert_eq!(log[0], mismatch(fake.count(&old[0]), expected as usize));
    let mut cut = 0;
    for (i, text) in texts(&plan, &c).iter().enumerate() {
        let target = qwen3().count(&old[i], false).unwrap() as usize;
        let ids = fake.ids(&old[i], false);
        if ids.len() > target {
            cut += 1;
            assert_eq!(text, &fake.text(&ids[..target]), "request {i}");
        } else {
            assert_eq!(plan.requests[i].body, before.requests[i].body, "request {i}");
        }
        assert_eq!(plan.requests[i].prompt_tokens, before.requests[i].prompt_tokens, "vLLM keeps prompt_len");
    }
    assert!(cut > 0);
    assert_eq!(outcome, Alignment::Realigned { cut, failed: 0 });
    assert_eq!(plan.token_counting, before.token_counting);
    assert_eq!(
        log[1],
        format!(
            "Prompts re-aligned to the server's tokenizer (http://127.0.0.1:9/tokenize): {cut} of 12 cut to their \
             planned length."
        )
    );
}

#[tokio::test]
async fn chat_prompts_are_cut_to_their_local_count_without_the_template() {
    // A chat request's planned count includes the template, so the cut is to the prompt's own
    // count, made locally.
    let c = config(Backend::OpenaiChat, 8, 24);
    let mut plan = build_plan(&c, Some(qwen3())).unwrap();
    let before = plan.clone();
    let (outcome, _, fake) = align(Fake::new(Vocab::Words { long: 3, bos: false }), &mut plan, &c, Some(qwen3())).await;
    let old = texts(&before, &c);
    let mut cut = 0;
    for (i, text) in texts(&plan, &c).iter().enumerate() {
        let target = qwen3().count(&old[i], false).unwrap() as usize;
        assert!((before.requests[i].prompt_tokens as usize) > target, "the template counts");
        let ids = fake.ids(&old[i], false);
        if ids.len() > target {
            cut += 1;
            assert_eq!(text, &fake.text(&ids[..target]), "request {i}");
        }
    }
    assert!(cut > 0);
    assert_eq!(outcome, Alignment::Realigned { cut, failed: 0 });
}

#[tokio::test]
async fn other_plans_are_left_alone() {
    let c = config(Backend::Vllm, 3, 8);
    let plan = build_plan(&c, None).unwrap();
    let mut other = c.clone();
    other.workload = WorkloadSpec::Trace { path: "t.jsonl".into(), time_scale: 1.0, timed: None };
    assert!(!applies(&plan, &other, None));
    // Several prompts a request (`--random-batch-size`) are a list vLLM does not align.
    let mut batched = c.clone();
    if let WorkloadSpec::Random { batch_size, .. } = &mut batched.workload {
        *batch_size = 2;
    }
    assert!(!applies(&plan, &batched, None));
    let mut counted = plan.clone();
    counted.token_counting = TokenCounting::Server { base_url: "http://h".into() };
    assert!(!applies(&counted, &c, None));
    let mut local = plan.clone();
    local.token_counting = TokenCounting::Tokenizer("qwen3".into());
    assert!(!applies(&local, &c, None), "a tokenizer-counted plan needs its tokenizer");
    assert!(applies(&local, &c, Some(qwen3())));
    assert!(applies(&plan, &c, None));

    let log: Logger = Arc::new(|l: &str| panic!("nothing is printed: {l}"));
    let mut replaced = plan.clone();
    let mut extra = c.clone();
    extra.extra_body.insert("prompt".into(), json!("fixed"));
    assert_eq!(
        align_with(Arc::new(Fake::new(Vocab::Qwen3)), &mut replaced, &extra, None, &log).await,
        Alignment::NotApplicable
    );
    assert_eq!(replaced, plan);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_answering_404_gets_vllms_warning_over_http() {
    let server = TestServer::start(TestServerConfig::new(1, |_| Script::default())).await.unwrap();
    let mut c = config(Backend::Vllm, 4, 8);
    c.target.base_url = server.base_url();
    let mut plan = build_plan(&c, None).unwrap();
    let before = plan.clone();
    let lines = Arc::new(Mutex::new(Vec::new()));
    let sink = Arc::clone(&lines);
    let log: Logger = Arc::new(move |l: &str| sink.lock().unwrap().push(l.to_string()));
    assert_eq!(align_prompts(&mut plan, &c, None, None, &log).await, Alignment::Unavailable);
    assert_eq!(*lines.lock().unwrap(), ["WARNING: /tokenize unavailable (404 Not Found), skipping alignment."]);
    assert_eq!(plan, before);
    let truth = server.truth();
    assert_eq!(truth.iter().map(|t| (t.path.as_str(), t.status)).collect::<Vec<_>>(), [("/tokenize", 404)]);
}

#[tokio::test]
async fn after_a_call_without_an_answer_no_more_are_made() {
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let base = format!("http://{}", closed.local_addr().unwrap());
    drop(closed);
    let server = HttpServer::new(&base, "m", &[], false, 4, None, Arc::new(|_: &str| {})).unwrap();
    let first = server.tokenize("a b", false).await.unwrap_err();
    assert!(matches!(first, AlignError::Send { .. }), "{first}");
    assert!(first.to_string().contains("check that the server is up"), "{first}");
    let warning = unavailable(&first, &format!("{base}/"));
    assert!(warning.starts_with(&format!("WARNING: {base} unreachable (")), "{warning}");
    assert!(warning.ends_with("), skipping alignment."), "{warning}");
    let second = server.detokenize(&[1, 2]).await.unwrap_err();
    assert!(matches!(second, AlignError::GaveUp { ref url } if url.ends_with("/detokenize")), "{second}");
}
