//! The KV block pool with its prefix cache.
//!
//! Memory is counted in units (see [`KvLayout`]). A full block costs `units_per_block`; blocks a
//! request no longer references stay cached (evictable, least recently freed first) when they
//! carry a hash, so a later request with the same prefix reuses them. Sliding-window units are
//! private to a request and never cached.

use std::collections::HashMap;
use std::collections::hash_map::Entry;
use std::hash::{BuildHasherDefault, Hasher};

use crate::setup::KvLayout;

const NIL: u32 = u32::MAX;

/// Block hashes are already well mixed, so the map uses them as they are.
#[derive(Default)]
pub(crate) struct IdentityHasher(u64);

impl Hasher for IdentityHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 = (self.0 << 8) | u64::from(*b);
        }
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = n;
    }
}

type HashIndex = HashMap<u64, u32, BuildHasherDefault<IdentityHasher>>;

#[derive(Clone, Copy)]
struct Block {
    hash: u64,
    hashed: bool,
    refs: u32,
    prev: u32,
    next: u32,
}

/// The pool of one GPU's KV memory.
pub(crate) struct BlockPool {
    layout: KvLayout,
    caching: bool,
    free_units: u64,
    blocks: Vec<Block>,
    free_slots: Vec<u32>,
    index: HashIndex,
    lru_head: u32,
    lru_tail: u32,
    evictable: u64,
}

impl BlockPool {
    pub fn new(layout: KvLayout, caching: bool) -> Self {
        Self {
            layout,
            caching,
            free_units: layout.total_units,
            blocks: Vec::new(),
            free_slots: Vec::new(),
            index: HashIndex::default(),
            lru_head: NIL,
            lru_tail: NIL,
            evictable: 0,
        }
    }

    pub fn layout(&self) -> &KvLayout {
        &self.layout
    }

    fn block_units(&self) -> u64 {
        u64::from(self.layout.units_per_block)
    }

    /// Units obtainable now: free ones plus every evictable cached block.
    pub fn available_units(&self) -> u64 {
        self.free_units + self.evictable * self.block_units()
    }

    /// Units held by running requests (cached-but-unused blocks count as free).
    pub fn used_units(&self) -> u64 {
        self.layout.total_units - self.available_units()
    }

    /// How many leading `hashes` are cached, and how many of those are evictable now.
    pub fn lookup(&self, hashes: &[u64]) -> (u32, u32) {
        if !self.caching {
            return (0, 0);
        }
        let mut hits = 0;
        let mut idle = 0;
        for h in hashes {
            match self.index.get(h) {
                Some(&slot) => {
                    hits += 1;
                    idle += u32::from(self.blocks[slot as usize].refs == 0);
                }
                None => break,
            }
        }
        (hits, idle)
    }

    /// Takes a reference on the cached blocks of `hashes` (all must be cached), appending slots.
    pub fn take_cached(&mut self, hashes: &[u64], out: &mut Vec<u32>) {
        for h in hashes {
            let slot = self.index[h];
            if self.blocks[slot as usize].refs == 0 {
                self.unlink(slot);
                self.evictable -= 1;
            }
            self.blocks[slot as usize].refs += 1;
            out.push(slot);
        }
    }

    /// Frees at least `units` units, evicting least recently freed cached blocks.
    fn make_room(&mut self, units: u64) {
        while self.free_units < units && self.lru_head != NIL {
            let slot = self.lru_head;
            self.unlink(slot);
            self.evictable -= 1;
            let b = &mut self.blocks[slot as usize];
            b.hashed = false;
            let hash = b.hash;
            self.index.remove(&hash);
            self.free_slots.push(slot);
            self.free_units += self.block_units();
        }
    }

    /// Empties the prefix cache (vLLM's `reset_prefix_cache`): every cached block is freed.
    /// Refused (false) while a request holds memory, as vLLM refuses while blocks are in use.
    pub fn reset_cache(&mut self) -> bool {
        if self.used_units() > 0 {
            return false;
        }
        self.make_room(u64::MAX);
        debug_assert!(self.index.is_empty() && self.evictable == 0);
        true
    }

    /// Allocates `n` fresh blocks, appending their slots. The caller checked the room.
    pub fn allocate(&mut self, n: u32, out: &mut Vec<u32>) {
        for _ in 0..n {
            self.make_room(self.block_units());
            debug_assert!(self.free_units >= self.block_units(), "allocation without room");
            self.free_units -= self.block_units();
            let block = Block { hash: 0, hashed: false, refs: 1, prev: NIL, next: NIL };
            let slot = if let Some(s) = self.free_slots.pop() {
                self.blocks[s as usize] = block;
                s
            } else {
                self.blocks.push(block);
                (self.blocks.len() - 1) as u32
            };
            out.push(slot);
        }
    }

    /// Takes `units` private (sliding-window) units. The caller checked the room.
    pub fn take_units(&mut self, units: u64) {
        self.make_room(units);
        debug_assert!(self.free_units >= units, "private units without room");
        self.free_units -= units;
    }

    /// Returns private units.
    pub fn give_units(&mut self, units: u64) {
        self.free_units += units;
    }

    /// Offers a computed full block to the prefix cache under `hash`.
    pub fn register(&mut self, slot: u32, hash: u64) {
        if !self.caching || self.blocks[slot as usize].hashed {
            return;
        }
        match self.index.entry(hash) {
            Entry::Occupied(_) => return,
            Entry::Vacant(v) => v.insert(slot),
        };
        let b = &mut self.blocks[slot as usize];
        b.hash = hash;
        b.hashed = true;
    }

    /// Drops one reference; an unreferenced block is cached (if hashed) or freed.
    pub fn release(&mut self, slot: u32) {
        let b = &mut self.blocks[slot as usize];
        debug_assert!(b.refs > 0, "double release of block {slot}");
        b.refs -= 1;
        if b.refs > 0 {
            return;
        }
        if b.hashed {
            self.push_tail(slot);
            self.evictable += 1;
        } else {
            self.free_slots.push(slot);
            self.free_units += self.block_units();
        }
    }

    fn unlink(&mut self, slot: u32) {
        let Block { prev, next, .. } = self.blocks[slot as usize];
        if prev == NIL {
            self.lru_head = next;
        } else {
            self.blocks[prev as usize].next = next;
        }
        if next == NIL {
            self.lru_tail = prev;
        } else {
            self.blocks[next as usize].prev = prev;
        }
        let b = &mut self.blocks[slot as usize];
        b.prev = NIL;
        b.next = NIL;
    }

    fn push_tail(&mut self, slot: u32) {
        let tail = self.lru_tail;
        {
            let b = &mut self.blocks[slot as usize];
            b.prev = tail;
            b.next = NIL;
        }
        if tail == NIL {
            self.lru_head = slot;
        } else {
            self.blocks[tail as usize].next = slot;
        }
        self.lru_tail = slot;
    }

    /// Checks the accounting: units in use, cached and free add up to the total. For tests.
    #[cfg(test)]
    pub fn check(&self, private_units: u64) -> Result<(), String> {
        let live = self.blocks.iter().enumerate().filter(|(i, _)| !self.free_slots.contains(&(*i as u32)));
        let referenced = live.clone().filter(|(_, b)| b.refs > 0).count() as u64;
        let cached = live.filter(|(_, b)| b.refs == 0).count() as u64;
        if cached != self.evictable {
            return Err(format!("{cached} idle blocks but {} evictable", self.evictable));
        }
        let sum = self.free_units + (referenced + cached) * self.block_units() + private_units;
        if sum != self.layout.total_units {
            return Err(format!(
                "free {} + blocks {} x {} + private {private_units} != total {}",
                self.free_units,
                referenced + cached,
                self.block_units(),
                self.layout.total_units
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn layout(total: u64) -> KvLayout {
        KvLayout {
            block_size: 16,
            total_units: total,
            units_per_block: 1,
            sliding_units_per_block: 0,
            sliding_cap_blocks: 0,
            state_units: 0,
        }
    }

    #[test]
    fn freed_hashed_blocks_stay_cached_until_room_is_needed() {
        let mut p = BlockPool::new(layout(4), true);
        let mut a = Vec::new();
        p.allocate(3, &mut a);
        p.register(a[0], 11);
        p.register(a[1], 22);
        for s in a.iter().rev() {
            p.release(*s);
        }
        p.check(0).unwrap();
        assert_eq!(p.available_units(), 4);
        assert_eq!(p.lookup(&[11, 22, 33]), (2, 2));
        // Taking all four blocks evicts the cached ones, the last freed first.
        let mut b = Vec::new();
        p.allocate(2, &mut b);
        assert_eq!(p.lookup(&[11, 22]), (2, 2));
        p.allocate(1, &mut b);
        assert_eq!(p.lookup(&[11, 22]), (1, 1), "block 22 was freed first, so evicted first");
        p.check(0).unwrap();
        let mut c = Vec::new();
        p.take_cached(&[11], &mut c);
        assert_eq!(p.available_units(), 0);
        p.check(0).unwrap();
    }

    #[test]
    fn without_caching_nothing_is_found() {
        let mut p = BlockPool::new(layout(2), false);
        let mut a = Vec::new();
        p.allocate(1, &mut a);
        p.register(a[0], 5);
        p.release(a[0]);
        assert_eq!(p.lookup(&[5]), (0, 0));
        assert_eq!(p.available_units(), 2);
        p.take_units(2);
        p.check(2).unwrap();
        p.give_units(2);
        p.check(0).unwrap();
    }
}
