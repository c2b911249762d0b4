//! One scheduling decision and its aftermath, as vLLM V1 does it.
//!
//! Running requests go first, in order: each gets its next token (decode) or its next prompt
//! chunk, within the step's token budget; when KV blocks run out, the last running request is
//! preempted (its blocks freed, its prompt and outputs recomputed later) until the current one
//! fits. Only if nothing was preempted, waiting requests are admitted first-come first-served
//! while the budget, `max_num_seqs` and the blocks allow, reusing cached prefix blocks (full
//! blocks only, never the prompt's last token) and prefilling the rest in chunks.

use super::request::Phase;
use super::{Emission, Engine, FinishReason, RequestTimes, Scheduled};
use crate::cost::BatchStats;

impl Engine {
    /// Units a request needs to hold `tokens` tokens, beyond what it holds, given `shared`
    /// blocks it will take from the prefix cache.
    fn extra_units(&self, slot: u32, tokens: u32, shared: u32) -> u64 {
        let kv = &self.cfg.kv;
        let r = self.req(slot);
        let need_blocks = tokens.div_ceil(kv.block_size);
        let held = r.blocks.len() as u32 + shared;
        let new_full = need_blocks.saturating_sub(held);
        let new_sliding = need_blocks.min(kv.sliding_cap_blocks).saturating_sub(r.sliding_blocks);
        let state = if r.holds_state || need_blocks == 0 { 0 } else { u64::from(kv.state_units) };
        u64::from(new_full) * u64::from(kv.units_per_block)
            + u64::from(new_sliding) * u64::from(kv.sliding_units_per_block)
            + state
    }

    /// Grows a request's allocation to hold `tokens` tokens. The room was checked.
    fn grow(&mut self, slot: u32, tokens: u32) {
        let kv = self.cfg.kv;
        let need_blocks = tokens.div_ceil(kv.block_size);
        let r = self.reqs[slot as usize].as_mut().expect("live request slot");
        let new_full = need_blocks.saturating_sub(r.blocks.len() as u32);
        let sliding_target = need_blocks.min(kv.sliding_cap_blocks);
        let new_sliding = sliding_target.saturating_sub(r.sliding_blocks);
        r.sliding_blocks = r.sliding_blocks.max(sliding_target);
        let state = if r.holds_state || need_blocks == 0 { 0 } else { u64::from(kv.state_units) };
        r.holds_state |= need_blocks > 0;
        self.pool.allocate(new_full, &mut r.blocks);
        self.pool.take_units(u64::from(new_sliding) * u64::from(kv.sliding_units_per_block) + state);
    }

    /// Frees every block a request holds (the tail first, so it is evicted first).
    pub(super) fn release_blocks(&mut self, slot: u32) {
        let kv = self.cfg.kv;
        let r = self.reqs[slot as usize].as_mut().expect("live request slot");
        for &b in r.blocks.iter().rev() {
            self.pool.release(b);
        }
        r.blocks.clear();
        let state = if r.holds_state { u64::from(kv.state_units) } else { 0 };
        self.pool.give_units(u64::from(r.sliding_blocks) * u64::from(kv.sliding_units_per_block) + state);
        r.sliding_blocks = 0;
        r.holds_state = false;
        r.registered = 0;
    }

    /// Sends a running request back to the head of the queue; its KV is recomputed later (what
    /// it has in flight is dropped when that batch returns).
    fn preempt(&mut self, slot: u32) {
        self.release_blocks(slot);
        let r = self.req_mut(slot);
        r.num_computed = 0;
        r.in_flight = 0;
        r.phase = Phase::Waiting;
        r.preemptions += 1;
        self.waiting.push_front(slot);
        self.counters.preemptions += 1;
    }

    fn note(&mut self, slot: u32, new_tokens: u32, batch: &mut BatchStats) {
        let r = self.req(slot);
        let prefill = r.in_prefill();
        let upto = r.scheduled_upto();
        let samples = upto + new_tokens >= r.num_tokens();
        if !prefill && new_tokens > 1 {
            // A decode with draft tokens (speculative decoding): its last token and the drafts.
            batch.add_verification(upto, new_tokens, self.cfg.window);
        } else {
            batch.add_sequence(upto, new_tokens, self.cfg.window, prefill, samples);
        }
        if prefill {
            let chunk = upto..upto.saturating_add(new_tokens);
            for img in r.images.iter().filter(|img| chunk.contains(&img.at)) {
                batch.add_image(img.work);
            }
        }
        self.scheduled.push(Scheduled { slot, new_tokens, generation: r.generation, epoch: r.preemptions });
        self.req_mut(slot).in_flight += new_tokens;
    }

    /// Builds this step's batch into `self.scheduled`; returns its stats and the preemptions.
    pub(super) fn schedule(&mut self) -> (BatchStats, u32) {
        let mut batch = BatchStats::default();
        let mut budget = self.cfg.max_num_batched_tokens;
        let mut preempted = 0u32;

        let mut i = 0;
        while i < self.running.len() && budget > 0 {
            let slot = self.running[i];
            let r = self.req(slot);
            let mut n = (r.num_tokens() - r.scheduled_upto()).min(budget);
            if n == 1
                && !r.in_prefill()
                && let Some(spec) = &self.cfg.spec
            {
                // Speculative decoding: the last token and the drafts, none past the request's
                // last output or the model's context.
                let room = r
                    .max_tokens
                    .saturating_sub(r.num_output + 1)
                    .min(self.cfg.max_model_len.saturating_sub(r.num_tokens()));
                n = (1 + spec.tokens.min(room)).min(budget);
            }
            if n == 0 {
                // Its last token is still in flight through the pipeline's stages.
                i += 1;
                continue;
            }
            let target = r.scheduled_upto() + n;
            let mut fits = true;
            while self.extra_units(slot, target, 0) > self.pool.available_units() {
                let Some(victim) = self.running.pop() else {
                    fits = false;
                    break;
                };
                self.preempt(victim);
                preempted += 1;
                if victim == slot {
                    fits = false;
                    break;
                }
            }
            if !fits {
                break;
            }
            self.grow(slot, target);
            self.note(slot, n, &mut batch);
            budget -= n;
            i += 1;
        }

        if preempted == 0 {
            // vLLM times a request's queue to the scheduling pass that first takes it.
            let planned = self.planned_at();
            while budget > 0 && self.running.len() < self.cfg.max_num_seqs as usize {
                let Some(&slot) = self.waiting.front() else {
                    break;
                };
                let r = self.req(slot);
                let bs = self.cfg.kv.block_size;
                // The last token is always computed, so at most (tokens - 1) / bs blocks hit.
                let max_hit = ((r.num_tokens() - 1) / bs) as usize;
                let probe = &r.hashes[..max_hit.min(r.hashes.len())];
                let (hits, idle_hits) = if r.num_computed == 0 { self.pool.lookup(probe) } else { (0, 0) };
                let computed = r.num_computed.max(hits * bs);
                let n = (r.num_tokens() - computed).min(budget);
                let need = self.extra_units(slot, computed + n, hits);
                let room = self.pool.available_units() - u64::from(idle_hits) * u64::from(self.cfg.kv.units_per_block);
                if need > room {
                    break;
                }
                let first_admission = r.num_output == 0 && r.preemptions == 0;
                let prompt_len = r.prompt_len;
                self.waiting.pop_front();
                {
                    let r = self.reqs[slot as usize].as_mut().expect("live request slot");
                    self.pool.take_cached(&r.hashes[..hits as usize], &mut r.blocks);
                    r.registered = hits;
                    r.num_computed = computed;
                    r.phase = Phase::Running;
                    r.scheduled_ns.get_or_insert(planned.max(r.ready_ns));
                    if first_admission {
                        r.cached_tokens = hits * bs;
                    }
                }
                if first_admission {
                    self.counters.prefix_queries += u64::from(prompt_len);
                    self.counters.prefix_hits += u64::from(hits * bs);
                    self.counters.prompt_tokens += u64::from(prompt_len);
                }
                self.grow(slot, computed + n);
                self.running.push(slot);
                batch.admitted += 1;
                self.note(slot, n, &mut batch);
                budget -= n;
            }
        }
        (batch, preempted)
    }

    /// Applies the step at its end: computed tokens, cache registration, sampled tokens and
    /// finished requests.
    pub(super) fn finish_step(&mut self) {
        let bs = self.cfg.kv.block_size;
        let hashing = self.cfg.enable_prefix_caching;
        let mut any_finished = false;
        for k in 0..self.scheduled.len() {
            let Scheduled { slot, new_tokens, generation, epoch } = self.scheduled[k];
            // A request cancelled or preempted while its batch was in flight drops the result.
            let Some(r) =
                self.reqs[slot as usize].as_mut().filter(|r| r.generation == generation && r.preemptions == epoch)
            else {
                continue;
            };
            r.in_flight -= new_tokens;
            // Draft tokens beyond the request's own (speculative decoding): those accepted are
            // computed and emitted with the token the step samples.
            let drafts = (r.num_computed + new_tokens).saturating_sub(r.num_tokens());
            let accepted = match &self.cfg.spec {
                Some(spec) if drafts > 0 => {
                    let a = spec.accepted(drafts, &mut self.spec_rng);
                    let c = &mut self.counters;
                    c.spec_drafts += 1;
                    c.spec_draft_tokens += u64::from(drafts);
                    c.spec_accepted += u64::from(a);
                    for pos in c.spec_accepted_per_pos.iter_mut().take(a as usize) {
                        *pos += 1;
                    }
                    a
                }
                _ => 0,
            };
            r.num_computed += new_tokens - drafts + accepted;
            // Blocks whose tokens are all known (accepted drafts fill theirs as they are emitted).
            let full = ((r.num_computed / bs) as usize).min(r.hashes.len());
            for b in r.registered as usize..full {
                self.pool.register(r.blocks[b], r.hashes[b]);
            }
            r.registered = r.registered.max(full as u32);
            if r.num_computed < r.num_tokens() {
                continue;
            }
            for j in 0..=accepted {
                r.num_output += 1;
                let token = r.output_token(r.num_tokens() - 1);
                if hashing && r.num_tokens().is_multiple_of(bs) {
                    r.hash_completed_block(bs);
                }
                let finish = if r.num_output >= r.max_tokens {
                    Some(FinishReason::Length)
                } else if r.num_output >= r.stop_at {
                    Some(FinishReason::Stop)
                } else {
                    None
                };
                if r.num_output == 1 {
                    r.first_token_ns = Some(self.now_ns);
                    self.counters.phases.first_token(self.now_ns.saturating_sub(r.arrived_ns));
                }
                self.emissions.push(Emission {
                    id: super::RequestId { slot, generation: r.generation },
                    tag: r.tag,
                    index: r.num_output,
                    token,
                    finish,
                    continues: j > 0,
                });
                self.counters.generation_tokens += u64::from(!r.pooled);
                if finish.is_some() {
                    let times = RequestTimes {
                        tag: r.tag,
                        arrived_ns: r.arrived_ns,
                        ready_ns: r.ready_ns,
                        scheduled_ns: r.scheduled_ns.unwrap_or(r.ready_ns),
                        first_token_ns: r.first_token_ns.unwrap_or(self.now_ns),
                        finished_ns: self.now_ns,
                    };
                    self.counters.phases.finished(&times);
                    self.finished.push(times);
                    any_finished = true;
                    break;
                }
            }
        }
        if any_finished {
            for k in 0..self.emissions.len() {
                let e = self.emissions[k];
                if e.finish.is_some() {
                    self.free_request(e.id.slot);
                }
            }
            let reqs = &self.reqs;
            self.running.retain(|&s| reqs[s as usize].is_some());
        }
    }
}
