/*
 * The publication protocol of guideloom-publish, as a Promela model for spin.
 *
 * What it stands for (docs/publication.md, "The protocol model", maps each step to its code):
 *   - a store with S3's semantics: create-only puts (If-None-Match: *) that either create an
 *     object or find one there, reads that see every completed write (strong consistency), and
 *     one mutable object (the annotation catalog) written by compare-and-swap (If-Match);
 *   - publishers that claim a snapshot id (claims/<id>.json), commit a manifest at the next
 *     free sequence number of the log (log/<seq>.json, THE commit point), and write a pointer
 *     (snapshots/<id>.json); a retry of the same request resumes an existing claim;
 *   - annotators that add their set to the catalog by read-modify-CAS-retry;
 *   - a crash at every step: any attempt may stop after any write (a crash after a read is the
 *     same as one before it), after which the same request may run again (an orchestrator's
 *     retry), up to MAX_ATTEMPTS attempts (default 2); a write followed by a crash also stands
 *     for a write whose reply was lost.
 *
 * Compile-time switches (cargo xtask model runs each configuration):
 *   SCENARIO 1: three identical requests (same snapshot id, same shards, full)
 *   SCENARIO 2: two identical requests and a third with the same id and other shards
 *   SCENARIO 3: three appenders of two snapshot ids: the third runs the first's request again
 *   SCENARIO 4: two identical publishers and two annotators of the first snapshot
 *   NONATOMIC:  a declared mount: a created object is visible before its bytes are complete
 *               (readers see it partial until its writer finishes, forever if the writer dies)
 *   MAX_ATTEMPTS: attempts per process (default 2).
 *   BUGGY_RESUME: the resume step as the code had it at 0632596 (no base sequence in the
 *               claim, no scan of the entries committed since): spin must find a violation.
 *
 * The garbage collector (SCENARIO 5 and up define GC): one collector run (gc::collect, policy
 * "keep the latest snapshot", grace period 0) beside publishers and an annotator, on top of an
 * existing snapshot 1; shards are a bitmask of present objects, written by workers before the
 * model starts.
 *   SCENARIO 5: GC + a full publisher of id 2 + an appender of id 3
 *   SCENARIO 6: GC + a full publisher of id 2 + an annotator of snapshot 1
 *   SCENARIO 7: GC + two identical full publishers of id 2
 *   GC_ATTEMPTS: attempts of the collector (default 2: a crashed run is resumed once).
 *   BUGGY_GC_NO_RECHECK: the collector skips step d (the second listing after its record);
 *   BUGGY_GC_NO_CHECK: publishers skip step 2 (reading the records after claiming);
 *   BUGGY_GC_ANNOT: the annotator ignores the catalog's `collected` and `expired`;
 *   BUGGY_GC_NO_GRACE: no claim grace: every claim in flight at the plan is a stale
 *               candidate, deleted unless it has an entry at step d, and resumed freely;
 *   BUGGY_GC_CHECK_SHARDS: step 2 looks for the request's shards in a record, not its claim;
 *   BUGGY_GC_NO_SNAPSHOT: publishers skip step -1: step 2 passes over the records done by then
 *               (not those done before the publisher started);
 *   BUGGY_GC_RECHECK_CLAIMS_ONLY: step d keeps the prefixes of the claims in flight, not the
 *               shards of the entries committed since the plan.
 *               Each must make spin find a violation.
 */

#ifndef SCENARIO
#define SCENARIO 1
#endif
#ifndef MAX_ATTEMPTS
#define MAX_ATTEMPTS 2
#endif

#if SCENARIO >= 5
#define GC
#endif
#if defined(GC) && defined(NONATOMIC)
#error "the collector is not modelled on a declared mount (docs/publication.md, The protocol model)"
#endif
#ifndef GC_ATTEMPTS
#define GC_ATTEMPTS 2
#endif

#define NPUB 3
#ifdef GC
#define NSNAP 4          /* snapshot ids 1..3 used; 0 is "none" */
#define ANN_SNAP 1       /* the snapshot the annotator annotates */
#else
#define NSNAP 3          /* snapshot ids 1..2 used; 0 is "none" */
#endif
#define MAXSEQ 6         /* log entries 1..MAXSEQ-1; reaching MAXSEQ is a model overflow */
#define FULL 0
#define APPEND 1

/* ---- the store ---------------------------------------------------------------------- */

typedef Entry {
    bool present;
    bool partial;        /* NONATOMIC: created, bytes not complete yet */
    byte snap;           /* snapshot id */
    byte nonce;          /* the claim's nonce */
    byte parent;         /* parent sequence number (0: none) */
    byte mode;
    byte shards          /* bitmask of shard references */
};
Entry log[MAXSEQ];

bool claim_present[NSNAP];
bool claim_partial[NSNAP];
byte claim_digest[NSNAP];  /* which request (by digest) made the claim */
byte claim_nonce[NSNAP];
byte claim_base[NSNAP];    /* the latest sequence number when the claim was made */

byte ptr_seq[NSNAP];       /* snapshots/<id>.json: 0 = absent */
bool ptr_partial[NSNAP];

byte cat_version;          /* the catalog's etag */
byte cat_sets;             /* bitmask of annotation sets in the catalog */

byte nonce_counter;

#ifdef GC
/* shards/...: bit i = shard i present. Shard 0 is snapshot 1's, 1 and 2 the requests'. */
byte shards_present;
byte claim_prefix[NSNAP];  /* the claim's prefixes: the request's shards */
/* The one timing assumption, as state: `held` counts the publishers working with a claim
 * (created or resumed, not yet finished, failed or crashed); `abandoned` is "older than the
 * claim grace" (set by the collector only on a claim nobody holds; publishers refuse to resume
 * an abandoned claim, and one held is never abandoned: publishers give a claim up after half
 * the grace and resume one only younger than a quarter of it). */
byte held[NSNAP];
bool claim_abandoned[NSNAP];
byte cat_expired;          /* catalog: bitmask of expired snapshot ids */
byte cat_collected;        /* catalog: bitmask of annotators' values objects collected */
byte values_present;       /* annotations/<set>/<version>/values.jsonl, per annotator */
/* gc/<run>.json: its candidates D and the log's latest at the plan; gc/<run>.done */
bool rec_present;
byte rec_shards;
byte rec_claims;
byte rec_values;
byte rec_base;
bool rec_done;
#endif

/* ---- the requests and what was reported ---------------------------------------------- */

byte req_snap[NPUB];
byte req_digest[NPUB];     /* equal digests = identical requests */
byte req_mode[NPUB];
byte req_shards[NPUB];

byte reported_seq[NPUB];   /* a publisher reported success with this sequence number */
bool ann_reported[2];      /* an annotator reported success */

/* ---- the invariants (checked in every reachable state by the monitor) ---------------- */

/* A snapshot id appears in the log at most once. */
#define ONE_ENTRY(s) ( \
    ((log[1].present && log[1].snap == s) + (log[2].present && log[2].snap == s) + \
     (log[3].present && log[3].snap == s) + (log[4].present && log[4].snap == s) + \
     (log[5].present && log[5].snap == s)) <= 1)

/* The log is gap-free: an entry exists only after its predecessor. */
#define GAP_FREE ( \
    (!log[2].present || log[1].present) && (!log[3].present || log[2].present) && \
    (!log[4].present || log[3].present) && (!log[5].present || log[4].present))

/* A pointer opens an entry of its snapshot. */
#define PTR_OK(s) (ptr_seq[s] == 0 || ptr_partial[s] || \
    (log[ptr_seq[s]].present && log[ptr_seq[s]].snap == s))

/* Every entry carries the nonce of its snapshot's claim, and its parent is its predecessor. */
#define ENTRY_OK(q) (!log[q].present || log[q].partial || \
    (claim_present[log[q].snap] && claim_nonce[log[q].snap] == log[q].nonce && \
     log[q].parent == q - 1))

/* A reported success is really there: the entry of that request's id, complete, pointed at. */
#define REPORTED_OK(p) (reported_seq[p] == 0 || \
    (log[reported_seq[p]].present && !log[reported_seq[p]].partial && \
     log[reported_seq[p]].snap == req_snap[p] && ptr_seq[req_snap[p]] == reported_seq[p] && \
     claim_digest[req_snap[p]] == req_digest[p]))

/* No annotation set that was reported published is ever lost. */
#define ANN_OK(a) (!ann_reported[a] || (cat_sets & (1 << a)))

#ifdef GC
/* A complete entry of a snapshot that is not expired has every shard it references. */
#define SHARDS_OK(q) (!log[q].present || log[q].partial || \
    (cat_expired & (1 << log[q].snap)) || (log[q].shards & ~shards_present) == 0)
/* Every annotation entry in the catalog has its values object... */
#define VALUES_OK ((cat_sets & ~values_present) == 0)
/* ...and annotates a snapshot that is not expired. */
#define ANN_SNAP_OK (cat_sets == 0 || (cat_expired & (1 << ANN_SNAP)) == 0)
#define GC_INVARIANT (ONE_ENTRY(3) && PTR_OK(3) && \
    SHARDS_OK(1) && SHARDS_OK(2) && SHARDS_OK(3) && SHARDS_OK(4) && SHARDS_OK(5) && \
    VALUES_OK && ANN_SNAP_OK)
#else
#define GC_INVARIANT true
#endif

#define INVARIANT ( \
    ONE_ENTRY(1) && ONE_ENTRY(2) && GAP_FREE && PTR_OK(1) && PTR_OK(2) && \
    ENTRY_OK(1) && ENTRY_OK(2) && ENTRY_OK(3) && ENTRY_OK(4) && ENTRY_OK(5) && \
    REPORTED_OK(0) && REPORTED_OK(1) && REPORTED_OK(2) && ANN_OK(0) && ANN_OK(1) && \
    GC_INVARIANT)

active proctype monitor() {
end_monitor:
    atomic { !INVARIANT -> assert(false) }
}

/* ---- store operations ------------------------------------------------------------------ */

/* LIST log/: the latest sequence number (the log is gap-free, so the highest present). */
inline latest(L) {
    d_step {
        L = 0;
        do
        :: L + 1 < MAXSEQ && log[L + 1].present -> L++
        :: else -> break
        od
    }
}

/* A crash point: the attempt may stop here. Only writes are followed by one: a crash after a
 * read leaves the store as a crash before it would, so those points add states, not cases.
 * On a store without atomic writes, a write may also stop half done (between its create and
 * its completion). */
#define CRASH if :: skip :: goto crashed fi

/* ---- a publisher ------------------------------------------------------------------------ */

proctype publisher(byte me) {
    byte attempt = 0;
    byte s = req_snap[me];
    byte base, L, clear, seq, found, nonce, content_shards, q;
    bool created;
#ifdef GC
    bool holding;      /* this attempt counts in held[s] */
    bool seen_done;    /* (-1): the collector's record was done before we started */
#endif

attempt_start:
    attempt++;
    created = false; found = 0;
#ifdef GC
    /* (-1) gc::snapshot_records: LIST gc/, remember which records are done. */
    seen_done = rec_done;
    /* (0) verify_shards: HEAD every shard; a missing one is NotFound, before any claim (final:
     * a retry fails the same way). */
    if
    :: (req_shards[me] & ~shards_present) != 0 -> goto done
    :: else -> skip
    fi;
#else
    /* verify_shards: read-only, nothing to model. */
#endif
#ifndef BUGGY_RESUME
    /* The base: the latest entry before the claim (publication.rs: claim_base). */
    latest(base);
#endif
    /* claim: create-only put of claims/<id>.json */
    atomic {
        if
        :: !claim_present[s] ->
            claim_present[s] = true;
            claim_digest[s] = req_digest[me];
            nonce_counter++;
            claim_nonce[s] = nonce_counter;
#ifndef BUGGY_RESUME
            claim_base[s] = base;
#endif
#ifdef NONATOMIC
            claim_partial[s] = true;
#endif
#ifdef GC
            claim_prefix[s] = req_shards[me];
            claim_abandoned[s] = false;
            held[s]++; holding = true;
#endif
            nonce = nonce_counter;
            created = true
        :: else -> skip
        fi
    }
#ifdef NONATOMIC
    if :: created -> CRASH; claim_partial[s] = false :: else -> skip fi;
#endif
    CRASH;
    if
    :: !created ->
        /* read the claim back: another request's claim is a collision */
#ifdef NONATOMIC
        if
        :: !claim_partial[s] -> skip
        :: true -> goto failed      /* in flight, or its writer died: a typed error, retried */
        fi;
#endif
#ifdef GC
        /* read it back: deleted meanwhile (by the collector) -> the put's error, retried;
         * older than a quarter of the claim grace -> refused (typed), retried later */
        atomic {
            if
            :: !claim_present[s] -> goto failed
            :: claim_present[s] && claim_digest[s] != req_digest[me] -> goto collision
#ifndef BUGGY_GC_NO_GRACE
            :: claim_present[s] && claim_digest[s] == req_digest[me] && claim_abandoned[s] ->
                goto failed
#endif
            :: else -> nonce = claim_nonce[s]; base = claim_base[s]; held[s]++; holding = true
            fi
        }
#else
        if
        :: claim_digest[s] != req_digest[me] -> goto collision
        :: else -> nonce = claim_nonce[s]; base = claim_base[s]
        fi
#endif
    :: else -> skip
    fi;
#if defined(GC) && !defined(BUGGY_GC_NO_CHECK)
    /* (2) gc::check_after_claim: LIST gc/ again; a record not done at (-1) whose candidates
     * hold one of our shards or our claim: Collected (typed; a retry may pass or hit NotFound). */
#ifdef BUGGY_GC_NO_SNAPSHOT
    seen_done = rec_done;
#endif
    if
    :: rec_present && !seen_done &&
       ((rec_shards & req_shards[me]) != 0
#ifndef BUGGY_GC_CHECK_SHARDS
        || (rec_claims & (1 << s)) != 0
#endif
       ) -> goto failed
    :: else -> skip
    fi;
#endif

#ifdef BUGGY_RESUME
    /* 0632596: a resumed claim looks for a committed entry (pointer, else a scan of the
     * whole log); if none, it commits like a new claim, checking nothing again. */
    if
    :: !created ->
        if
        :: ptr_seq[s] != 0 && !ptr_partial[s] -> found = ptr_seq[s]; goto pointer
        :: else -> skip
        fi;
        latest(L);
        q = L;
        do
        :: q > 0 ->
            if
            :: log[q].snap == s && log[q].nonce == nonce -> found = q; goto pointer
            :: else -> skip
            fi;
            q--
        :: else -> break
        od
    :: else -> skip
    fi;
commit:
    latest(L);
#else
    /* Entries up to `clear` are known not to be ours: up to the base at first. The claim's
     * creator commits on its base without listing again; a resumer lists. */
    clear = base;
    if
    :: created -> L = base
    :: else -> goto relist
    fi;
    goto build;
relist:
    latest(L);
    /* Scan the entries committed since: an identical request may have committed ours. */
    q = clear + 1;
    do
    :: q <= L ->
#ifdef NONATOMIC
        if
        :: !log[q].partial -> skip
        :: true -> goto failed
        fi;
#endif
        if
        :: log[q].snap == s && log[q].nonce == nonce -> found = q; goto pointer
        :: log[q].snap == s && log[q].nonce != nonce -> assert(false)  /* Corrupt: cannot happen */
        :: else -> skip
        fi;
        q++
    :: else -> break
    od;
    clear = L;
build:
#endif
    /* The manifest at L + 1: deterministic for a given claim and parent. */
    seq = L + 1;
    assert(seq < MAXSEQ);           /* more entries than the scenario can make: a bug */
#ifdef NONATOMIC
    if
    :: L > 0 && req_mode[me] == APPEND && log[L].partial -> goto failed
    :: else -> skip
    fi;
#endif
    if
    :: req_mode[me] == APPEND && L > 0 -> content_shards = log[L].shards | req_shards[me]
    :: else -> content_shards = req_shards[me]
    fi;
    /* create-only put of log/<seq>.json; "exists" reads the object back and compares */
    atomic {
        if
        :: !log[seq].present ->
            log[seq].present = true;
#ifdef NONATOMIC
            log[seq].partial = true;
#endif
            log[seq].snap = s; log[seq].nonce = nonce; log[seq].parent = L;
            log[seq].mode = req_mode[me]; log[seq].shards = content_shards;
            found = seq
        :: log[seq].present && !log[seq].partial && log[seq].snap == s &&
           log[seq].nonce == nonce && log[seq].parent == L &&
           log[seq].mode == req_mode[me] && log[seq].shards == content_shards ->
            found = seq              /* identical bytes: an identical request wrote it */
        :: else -> found = 0         /* another entry (or one in flight): re-base */
        fi
    }
#ifdef NONATOMIC
    if :: found == seq && log[seq].partial -> CRASH; log[seq].partial = false :: else -> skip fi;
#endif
    CRASH;
#ifdef BUGGY_RESUME
    if :: found == 0 -> goto commit :: else -> skip fi;
#else
    if :: found == 0 -> goto relist :: else -> skip fi;
#endif

pointer:
    /* create-only put of snapshots/<id>.json naming `found` */
    atomic {
        if
        :: ptr_seq[s] == 0 ->
            ptr_seq[s] = found;
#ifdef NONATOMIC
            ptr_partial[s] = true;
#endif
            q = 1
        :: ptr_seq[s] == found && !ptr_partial[s] -> q = 1  /* identical */
        :: ptr_seq[s] == found && ptr_partial[s] -> q = 2   /* in flight: wait or fail */
        :: else -> q = 0                                    /* "different content" */
        fi
    }
#ifdef NONATOMIC
    if
    :: q == 1 && ptr_partial[s] -> CRASH; ptr_partial[s] = false
    :: q == 2 -> if :: !ptr_partial[s] -> q = 1 :: true -> goto failed fi
    :: else -> skip
    fi;
#endif
#ifdef BUGGY_RESUME
    if :: q == 0 -> goto failed :: else -> skip fi;
#else
    assert(q != 0);   /* a publisher of identical content never hears "different content" */
#endif
    CRASH;
    reported_seq[me] = found;
    goto done;

collision:
    /* PublicationCollision on the claim: only ever for another request's claim. */
    assert(claim_digest[s] != req_digest[me]);
    goto done;

crashed:
failed:
#ifdef GC
    /* the attempt is over: it no longer holds the claim */
    if :: holding -> held[s]--; holding = false :: else -> skip fi;
#endif
    if
    :: attempt < MAX_ATTEMPTS -> goto attempt_start
    :: else -> skip
    fi;
done:
#ifdef GC
    if :: holding -> held[s]--; holding = false :: else -> skip fi;
#endif
    skip
}

/* ---- an annotator ----------------------------------------------------------------------- */

proctype annotator(byte me) {
    byte attempt = 0;
    byte version, sets;
#ifdef GC
    byte expired, collected;
#endif
again:
    attempt++;
    /* annotates the snapshot the publishers publish: waits until one is there */
end_waiting:
    (log[1].present && !log[1].partial);
    /* values object create-only (keyed by set/version: never contended); then the catalog */
#ifdef GC
    values_present = values_present | (1 << me);   /* exists already: identical, ours */
    CRASH;
    do
    :: d_step { version = cat_version; sets = cat_sets;
                expired = cat_expired; collected = cat_collected };
       if
       :: sets & (1 << me) -> break       /* already there (ours landed earlier) */
#ifndef BUGGY_GC_ANNOT
       /* our values were collected, or the snapshot expired: Collected (typed, final) */
       :: !(sets & (1 << me)) &&
          ((collected & (1 << me)) || (expired & (1 << ANN_SNAP))) -> goto done
#endif
       :: else -> skip
       fi;
#else
    do
    :: d_step { version = cat_version; sets = cat_sets };
       if
       :: sets & (1 << me) -> break       /* already there (ours landed earlier) */
       :: else -> skip
       fi;
#endif
       atomic {
           if
           :: cat_version == version -> cat_sets = sets | (1 << me); cat_version++; break
           :: else -> skip               /* conflict: re-read */
           fi
       }
    od;
    CRASH;
    ann_reported[me] = true;
    goto done;
crashed:
    if :: attempt < MAX_ATTEMPTS -> goto again :: else -> skip fi;
done:
    skip
}

#ifdef GC
/* ---- the garbage collector (gc::collect) ------------------------------------------------ */

#define GC_CRASH if :: skip :: goto gc_crashed fi

/* the sequence number of the entry that commits claim s (0: none up to `upto`) */
inline committed_at(s, upto, r) {
    r = 0;
    q = 1;
    do
    :: q <= upto ->
        if
        :: log[q].present && log[q].snap == s && log[q].nonce == claim_nonce[s] -> r = q
        :: else -> skip
        fi;
        q++
    :: else -> break
    od
}

proctype gc() {
    byte attempt = 0;
    byte v, L, q, s, r, keep, kept_shards, expire, orphans, prefixes, dsh, dcl, dval;

gc_start:
    attempt++;
    /* a record without its done marker: the run crashed; finish it (d again, e, f) */
    if
    :: rec_present && !rec_done -> goto recheck
    :: rec_done -> goto gc_end
    :: else -> skip
    fi;

plan:
    /* a. gc::plan: read the catalog (etag v), list and read the log, list and read the claims.
     * One step: the CAS below succeeds only if the catalog is unchanged since the read, and
     * the log and the claims change only by publications, which step d and the publishers'
     * step 2 account for, so reading them at once or apart leads to the same outcomes. */
    atomic {
        v = cat_version;
        L = 0;
        do
        :: L + 1 < MAXSEQ && log[L + 1].present -> L++
        :: else -> break
        od;
        /* kept: the latest entry's snapshot, and the annotated one */
        keep = 0;
        if :: L > 0 -> keep = 1 << log[L].snap :: else -> skip fi;
        if :: cat_sets != 0 -> keep = keep | (1 << ANN_SNAP) :: else -> skip fi;
        kept_shards = 0; expire = 0;
        q = 1;
        do
        :: q <= L ->
            if
            :: keep & (1 << log[q].snap) -> kept_shards = kept_shards | log[q].shards
            :: else -> expire = expire | (1 << log[q].snap)
            fi;
            q++
        :: else -> break
        od;
        orphans = values_present & ~cat_sets;
        /* b. candidates. In-flight claims (no entry with their nonce) protect their prefixes;
         * one nobody holds may be older than the claim grace (a choice: the model does not
         * know its age), which abandons it and makes it a candidate. */
        prefixes = 0; dcl = 0;
        s = 1;
        do
        :: s < NSNAP ->
            if
            :: claim_present[s] ->
                committed_at(s, L, r);
                if
                :: r == 0 ->
                    prefixes = prefixes | claim_prefix[s];
#ifdef BUGGY_GC_NO_GRACE
                    dcl = dcl | (1 << s)
#else
                    if
                    :: held[s] == 0 -> claim_abandoned[s] = true; dcl = dcl | (1 << s)
                    :: true -> skip
                    fi
#endif
                :: else -> skip
                fi
            :: else -> skip
            fi;
            s++
        :: else -> break
        od;
        dsh = shards_present & ~kept_shards & ~prefixes;
        dval = values_present & (cat_collected | orphans)
    }
    /* CAS the catalog: expired |= expire, collected |= orphans; a conflict restarts a. */
    atomic {
        if
        :: cat_version == v ->
            cat_expired = cat_expired | expire;
            cat_collected = cat_collected | orphans;
            cat_version++
        :: else -> goto plan
        fi
    }
    GC_CRASH;
    /* c. gc::record: create gc/<run>.json with D and the log's latest L (create-only) */
    atomic {
        rec_present = true; rec_shards = dsh; rec_claims = dcl; rec_values = dval; rec_base = L
    }
    GC_CRASH;

recheck:
    /* d. gc::recheck: list the claims and the log again; D only shrinks. */
    atomic {
        dsh = rec_shards; dcl = rec_claims; dval = rec_values;
#ifndef BUGGY_GC_NO_RECHECK
        L = 0;
        do
        :: L + 1 < MAXSEQ && log[L + 1].present -> L++
        :: else -> break
        od;
        /* entries committed since the plan keep their shards */
#ifdef BUGGY_GC_RECHECK_CLAIMS_ONLY
        q = L + 1;
#else
        q = rec_base + 1;
#endif
        do
        :: q <= L -> dsh = dsh & ~log[q].shards; q++
        :: else -> break
        od;
        s = 1;
        do
        :: s < NSNAP ->
            if
            :: claim_present[s] ->
                committed_at(s, L, r);
                /* a claim in flight now keeps its prefixes */
                if :: r == 0 -> dsh = dsh & ~claim_prefix[s] :: else -> skip fi;
                /* a claim in D is deleted only if still the abandoned one, uncommitted */
                if
                :: (dcl & (1 << s)) && (r != 0
#ifndef BUGGY_GC_NO_GRACE
                                        || !claim_abandoned[s]
#endif
                                       ) -> dcl = dcl & ~(1 << s)
                :: else -> skip
                fi;
#ifndef BUGGY_GC_NO_GRACE
                /* the timing assumption's consequence: nobody holds an abandoned claim */
                assert(!(dcl & (1 << s)) || held[s] == 0)
#endif
            :: else -> dcl = dcl & ~(1 << s)    /* gone already: nothing to delete */
            fi;
            s++
        :: else -> break
        od
#endif
    }

    /* e. gc::sweep: one DELETE at a time. A DELETE of a claim may land twice (a retried
     * request whose first reply was lost), the second time after other processes ran. */
    s = 0;
    do
    :: s < 3 ->
        if
        :: dsh & (1 << s) -> shards_present = shards_present & ~(1 << s); GC_CRASH
        :: else -> skip
        fi;
        s++
    :: else -> break
    od;
    s = 1;
    do
    :: s < NSNAP ->
        if
        :: dcl & (1 << s) ->
            d_step {
                claim_present[s] = false; claim_digest[s] = 0; claim_nonce[s] = 0;
                claim_base[s] = 0; claim_prefix[s] = 0; claim_abandoned[s] = false
            };
            if
            :: skip
            :: d_step {
                claim_present[s] = false; claim_digest[s] = 0; claim_nonce[s] = 0;
                claim_base[s] = 0; claim_prefix[s] = 0; claim_abandoned[s] = false
               }
            fi;
            GC_CRASH
        :: else -> skip
        fi;
        s++
    :: else -> break
    od;
    if
    :: dval != 0 -> values_present = values_present & ~dval; GC_CRASH
    :: else -> skip
    fi;
    /* f. create gc/<run>.done */
    rec_done = true;
    goto gc_end;

gc_crashed:
    if :: attempt < GC_ATTEMPTS -> goto gc_start :: else -> skip fi;
gc_end:
    skip
}
#endif

init {
    atomic {
#if SCENARIO == 1
        req_snap[0] = 1; req_digest[0] = 1; req_mode[0] = FULL; req_shards[0] = 1;
        req_snap[1] = 1; req_digest[1] = 1; req_mode[1] = FULL; req_shards[1] = 1;
        req_snap[2] = 1; req_digest[2] = 1; req_mode[2] = FULL; req_shards[2] = 1;
        run publisher(0); run publisher(1); run publisher(2)
#elif SCENARIO == 2
        req_snap[0] = 1; req_digest[0] = 1; req_mode[0] = APPEND; req_shards[0] = 1;
        req_snap[1] = 1; req_digest[1] = 1; req_mode[1] = APPEND; req_shards[1] = 1;
        req_snap[2] = 1; req_digest[2] = 2; req_mode[2] = APPEND; req_shards[2] = 2;
        run publisher(0); run publisher(1); run publisher(2)
#elif SCENARIO == 3
        req_snap[0] = 1; req_digest[0] = 1; req_mode[0] = APPEND; req_shards[0] = 1;
        req_snap[1] = 2; req_digest[1] = 2; req_mode[1] = APPEND; req_shards[1] = 2;
        req_snap[2] = 1; req_digest[2] = 1; req_mode[2] = APPEND; req_shards[2] = 1;
        run publisher(0); run publisher(1); run publisher(2)
#elif SCENARIO == 4
        req_snap[0] = 1; req_digest[0] = 1; req_mode[0] = FULL; req_shards[0] = 1;
        req_snap[1] = 1; req_digest[1] = 1; req_mode[1] = FULL; req_shards[1] = 1;
        run publisher(0); run publisher(1);
        run annotator(0); run annotator(1)
#elif SCENARIO >= 5
        /* snapshot 1 exists: log/1 (shard 0), its claim and pointer; shards 1 and 2 are the
         * requests', uploaded by workers and not referenced by any entry yet */
        nonce_counter = 1;
        log[1].present = true; log[1].snap = 1; log[1].nonce = 1; log[1].parent = 0;
        log[1].mode = FULL; log[1].shards = 1;
        claim_present[1] = true; claim_digest[1] = 9; claim_nonce[1] = 1; claim_base[1] = 0;
        claim_prefix[1] = 1;
        ptr_seq[1] = 1;
        shards_present = 7;
        req_snap[0] = 2; req_digest[0] = 1; req_mode[0] = FULL; req_shards[0] = 2;
#if SCENARIO == 5
        req_snap[1] = 3; req_digest[1] = 2; req_mode[1] = APPEND; req_shards[1] = 4;
        run publisher(0); run publisher(1);
#elif SCENARIO == 6
        run publisher(0); run annotator(0);
#elif SCENARIO == 7
        req_snap[1] = 2; req_digest[1] = 1; req_mode[1] = FULL; req_shards[1] = 2;
        run publisher(0); run publisher(1);
#endif
        run gc()
#endif
    }
}
