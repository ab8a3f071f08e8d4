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
 */

#ifndef SCENARIO
#define SCENARIO 1
#endif
#ifndef MAX_ATTEMPTS
#define MAX_ATTEMPTS 2
#endif

#define NPUB 3
#define NSNAP 3          /* snapshot ids 1..2 used; 0 is "none" */
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

#define INVARIANT ( \
    ONE_ENTRY(1) && ONE_ENTRY(2) && GAP_FREE && PTR_OK(1) && PTR_OK(2) && \
    ENTRY_OK(1) && ENTRY_OK(2) && ENTRY_OK(3) && ENTRY_OK(4) && ENTRY_OK(5) && \
    REPORTED_OK(0) && REPORTED_OK(1) && REPORTED_OK(2) && ANN_OK(0) && ANN_OK(1))

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

attempt_start:
    attempt++;
    created = false; found = 0;
    /* verify_shards: read-only, nothing to model. */
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
        if
        :: claim_digest[s] != req_digest[me] -> goto collision
        :: else -> nonce = claim_nonce[s]; base = claim_base[s]
        fi
    :: else -> skip
    fi;

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
    if
    :: attempt < MAX_ATTEMPTS -> goto attempt_start
    :: else -> skip
    fi;
done:
    skip
}

/* ---- an annotator ----------------------------------------------------------------------- */

proctype annotator(byte me) {
    byte attempt = 0;
    byte version, sets;
again:
    attempt++;
    /* annotates the snapshot the publishers publish: waits until one is there */
end_waiting:
    (log[1].present && !log[1].partial);
    /* values object create-only (keyed by set/version: never contended); then the catalog */
    do
    :: d_step { version = cat_version; sets = cat_sets };
       if
       :: sets & (1 << me) -> break       /* already there (ours landed earlier) */
       :: else -> skip
       fi;
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
#endif
    }
}
