/*
 * election.pml: the election protocol of DESIGN.md as a Promela model, for
 * spin. scripts/modelcheck.sh checks it exhaustively, and checks that each
 * mutant below is caught.
 *
 * What is modelled (one record, integer clock ticks):
 *  - the store holds one record and applies a write only when it is
 *    conditioned on the version the store holds (or on absence); a write's
 *    response may be lost: applied or not, the writer is told "unknown" and
 *    resolves it by reading back its write id;
 *  - time is a global tick; each process's clock is that tick plus a fixed
 *    offset in [0, SKEW], so any two clocks differ by at most SKEW;
 *  - a worker acts while its own clock reads before the expiry of its
 *    TimeView, which holds only expiries the store accepted;
 *  - any process may be slow at any step for any number of ticks (that is how
 *    a leader's hung extension call, a slow read or a paused candidate show
 *    up), or stop for good (a crash acts no longer than such a hang, so it
 *    needs no step of its own); a leader may release, and then stops;
 *  - process 2 is a restarted incarnation of process 0 that reuses its
 *    LeaderID, while process 0 may still be alive;
 *  - an operator may delete the record once, at any moment.
 *
 * Steps that the engine performs as one store call are atomic. A write takes
 * t0 from the clock at the instant the store applies it, the latest t0 the
 * engine could have read: the worst case for everyone else. Clocks read whole
 * ticks and the model uses the tightest integer form of the rules (a holder
 * acts while clock < expiry, a candidate takes over once clock >= expiry +
 * SKEW), so no rounding slack can hide a missing margin.
 *
 * Left out on purpose (README, "Model check"): a process that has never seen
 * the record and finds it missing after the deletion; nothing in the store
 * can tell it about the old leader.
 *
 * Properties (assertions, checked in every reachable state):
 *  - mutual exclusion: no two workers act at the same global instant;
 *  - fencing: each tenure the store accepts has a term above every earlier
 *    tenure's term, across the deletion too.
 *
 * Mutants (compile with -D...; each must be caught):
 *  NOSKEW     a candidate takes over at the expiry, not expiry + SKEW;
 *  EARLYREL   the release is written before the worker stops;
 *  LIDADOPT   after an ambiguous write, a record is adopted because it
 *             carries our LeaderID instead of our write id;
 *  DELFREE    a record seen held and then found missing is free at once.
 */

#ifndef TERM
#define TERM 4		/* TermLength, in ticks */
#endif
#ifndef SKEW
#define SKEW 1		/* MaxClockSkew, in ticks */
#endif
#ifndef MAXT
#define MAXT 8		/* the last global tick explored */
#endif
#ifndef MAXAMB
#define MAXAMB 1	/* ambiguous write outcomes in one run */
#endif
#ifndef NUMRATE
#define NUMRATE 2	/* election numbers per clock tick for a created record */
#endif

#ifndef RELEASER
#define RELEASER 1	/* the process that may release (one keeps it small) */
#endif

#define NP 3		/* processes 0 and 1, and 2: the restart of 0 */
#define LID(i)	((i) == 2 -> 0 : (i))	/* LeaderIDs: 2 reuses 0's */

/* The store's record. Its version token is (epoch, en): the election number
 * goes up on every write, the epoch on the operator's deletion. The write id
 * of a record is (wp, en): a process never has two writes with the same
 * election number that could both land. */
bool present;
byte en;		/* ElectionNumber */
byte term;		/* Term */
byte wp;		/* the process that wrote it; its LeaderID is LID(wp) */
byte expiry;		/* TermExpiry, on the writer's clock */
bool released;
bool epoch;		/* set by the deletion */

byte now;		/* global time */
byte off[NP];		/* clock offsets */
byte tv[NP];		/* TimeView expiry (0 when not leading) */
bool running[NP];	/* the worker (OnElected and all acting for it) runs */
byte amb;		/* ambiguous outcomes so far */
short maxTerm = -1;	/* ghost: highest tenure term the store accepted */

#define CLK(i)	(now + off[i])
#define ACT(i)	(running[i] && CLK(i) < tv[i])
/* Mutual exclusion. A worker starts acting, or acts for longer, only in the
 * steps that set running or tv, and every such step asserts this; time and
 * every other step only end acting. So it holds in every reachable state. */
#define MUTEX	assert(!(ACT(0) && ACT(1)) && !(ACT(0) && ACT(2)) && !(ACT(1) && ACT(2)))

proctype cand(byte me)
{
	/* memory across reads */
	short lastSeen = -1;	/* highest term seen; -1: saw no record */
	byte heldUntil;		/* > 0: saw a record, then found none: it is
				 * treated as held until then (+ SKEW) */
	/* while writing and leading */
	byte wen;		/* election number of our last write */
	bool myepoch;		/* the epoch of the record we hold */
	byte cur;		/* election number of the record we hold */

	/* A poll reads the record and, when it is free, writes over it at
	 * once. The engine writes a moment after its read, conditioned on the
	 * version read; a write that follows a stale read fails, which is no
	 * different from writing nothing and reading again, and whether the
	 * record is free only grows with time. So an atomic poll is as good
	 * as a read and a later write, for any delay between them. */
campaign:
	do
	:: atomic {
		/* Out of scope: a process that has never seen a record and
		 * reads while a deleted one is missing (see the README). */
		(lastSeen >= 0 || present || !epoch) ->
		if
		:: present ->
			heldUntil = 0;
			if
			:: term > lastSeen -> lastSeen = term
			:: else -> skip
			fi
		:: !present && lastSeen >= 0 && heldUntil == 0 ->
			heldUntil = CLK(me) + TERM
		:: else -> skip
		fi;
		if
		:: (present && released) ||
#ifdef NOSKEW
		   (present && CLK(me) >= expiry) ||
#else
		   (present && CLK(me) >= expiry + SKEW) ||
#endif
#ifdef DELFREE
		   !present ->
#else
		   (!present && CLK(me) >= heldUntil + SKEW) ->
#endif
			/* free: write a new tenure over it */
			if
			:: present -> wen = en + 1
			:: else -> wen = CLK(me) * NUMRATE
			fi;
			if
			:: lastSeen + 1 > wen -> wen = lastSeen + 1
			:: else -> skip
			fi;
			if
			:: /* applied */
				assert(wen > maxTerm);	/* fencing */
				maxTerm = wen;
				present = 1; en = wen; term = wen; wp = me;
				expiry = CLK(me) + TERM; released = 0;
				heldUntil = 0;
				if
				:: /* and we are told so */
					tv[me] = expiry; running[me] = 1;
					cur = wen; myepoch = epoch; wen = 0;
					MUTEX;
					goto lead
				:: amb < MAXAMB -> amb++; goto readback
				fi
			:: amb < MAXAMB ->
				/* not applied, and the response was lost */
				amb++; goto readback
			fi
		:: else -> skip
		fi
	   }
	od;

readback:
	atomic {
		if
#ifdef LIDADOPT
		:: present && !released && LID(wp) == LID(me) ->
#else
		:: present && !released && wp == me && en == wen ->
#endif
			tv[me] = expiry; running[me] = 1;
			cur = en; myepoch = epoch; wen = 0;
			MUTEX;
			goto lead
		:: else -> wen = 0; goto campaign
		fi
	}

lead:
	do
	:: atomic {	/* the watchdog: the TimeView has expired */
		CLK(me) >= tv[me] ->
		running[me] = 0; tv[me] = 0; cur = 0; myepoch = 0;
		goto campaign
	   }
	:: atomic {	/* extend at expiry - TERM/2 */
		CLK(me) < tv[me] && CLK(me) >= tv[me] - TERM / 2 ->
		if
		:: present && epoch == myepoch && en == cur ->
			if
			:: /* applied */
				en = cur + 1; wp = me;
				expiry = CLK(me) + TERM; released = 0;
				if
				:: cur = en;
				   if
				   :: expiry > tv[me] -> tv[me] = expiry
				   :: else -> skip
				   fi;
				   MUTEX
				:: amb < MAXAMB -> amb++; wen = en; goto extreadback
				fi
			:: amb < MAXAMB -> amb++; wen = 0; goto extreadback
			fi
		:: else ->	/* lost: stop at once */
			running[me] = 0; tv[me] = 0; cur = 0; myepoch = 0;
			goto campaign
		fi
	   }
#ifdef ALLRELEASE
	:: goto release		/* every process may release */
#else
	:: me == RELEASER -> goto release
#endif
	od;

extreadback:
	atomic {
		if
		:: CLK(me) >= tv[me] ->
			/* the term ran out before the outcome was known */
			running[me] = 0; tv[me] = 0; cur = 0; myepoch = 0; wen = 0;
			goto campaign
		:: CLK(me) < tv[me] && present && epoch == myepoch && wp == me && en == wen ->
			cur = en; wen = 0;
			if
			:: expiry > tv[me] -> tv[me] = expiry
			:: else -> skip
			fi;
			MUTEX;
			goto lead
		:: CLK(me) < tv[me] && present && epoch == myepoch && en == cur ->
			wen = 0; goto lead	/* not applied: retry */
		:: else ->	/* another writer: stop at once */
			running[me] = 0; tv[me] = 0; cur = 0; myepoch = 0; wen = 0;
			goto campaign
		fi
	}

	/* Release, then stop: the process's Acquire was cancelled. */
release:
#ifndef EARLYREL
	/* the worker stops, the TimeView goes into the past */
	running[me] = 0;
#endif
	atomic {
		/* Written only before expiry + SKEW. Its response does not
		 * matter, as this process stops now. */
		if
		:: CLK(me) < tv[me] + SKEW && present && epoch == myepoch && en == cur ->
			en = cur + 1; wp = me; expiry = CLK(me); released = 1
		:: else -> skip
		fi
	};
	atomic {
		running[me] = 0; tv[me] = 0;
		lastSeen = 0; heldUntil = 0; wen = 0; myepoch = 0; cur = 0
	}
}

/* The operator deletes the record, once. */
active proctype operator()
{
	atomic { present && !epoch -> present = 0; epoch = 1 }
}

/* Time goes on. */
active proctype ticker()
{
	do
	:: now < MAXT -> now++
	od
}

init {
	atomic {
		if :: off[0] = 0 :: off[0] = SKEW fi;
		if :: off[1] = 0 :: off[1] = SKEW fi;
		if :: off[2] = 0 :: off[2] = SKEW fi;
		run cand(0); run cand(1); run cand(2)
	}
}
