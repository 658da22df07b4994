import type { CachedFile } from "./cache.ts";

/** The last block computed for a session, valid while nothing it was computed from has changed. */
export interface Memo {
  generation: number;
  version: number;
  hostKey: string;
  /** The `<project-context>` block, or "" for nothing to inject. */
  block: string;
  /** Every file that applies, in block order (root first, in the order their chains joined). */
  files: CachedFile[];
  /** Real paths of the files the block carries whole. */
  whole: Set<string>;
  /** Directories looked up to compute it: what stat validation re-checks. */
  dirs: string[];
  /** Directories touched paths lead to that did not exist: their creation changes where walks start. */
  missing: string[];
}

export class SessionState {
  /** Touched directories (absolute, lexical), oldest first: the order their sections join the block. */
  readonly touched = new Set<string>();
  /** Grows with every new touch, so a memo knows it is out of date. */
  version = 0;
  memo: Memo | undefined;
  /** Set once the session's earlier touches were read back from its history (a session met mid-way). */
  restoring: Promise<void> | undefined;
  /** A stat check of this session's files started at a step boundary; the next step waits for it. */
  validating: Promise<void> | undefined;
  /** Another check was asked for while one was under way. */
  recheck = false;
  /** A check at a step boundary finished since the last step: a stat-mode step need not check again. */
  checked = false;
  /** Host-injected paths seen in the last system prompt, for work done outside a system transform. */
  hostKey = "";
  hostPaths: ReadonlySet<string> = new Set();

  constructor(private readonly maxTouched: number) {}

  touch(dirs: readonly string[]): void {
    for (const dir of dirs) {
      if (this.touched.has(dir)) continue;
      this.touched.add(dir);
      this.version++;
      if (this.touched.size > this.maxTouched) {
        const oldest = this.touched.values().next().value;
        if (oldest !== undefined) this.touched.delete(oldest);
      }
    }
  }
}

/**
 * Sessions remembered at once. Each may hold up to `maxTouchedDirs` paths (~600 KB at the default
 * 4,096), so this bounds the worst case near 150 MB; a forgotten session is rebuilt from history.
 */
const MAX_SESSIONS = 256;

/**
 * Per-session state, isolated by sessionID. Bounded: past `maxSessions` the least recently used
 * session is forgotten (it is rebuilt from its history if it comes back).
 */
export class Sessions {
  private readonly states = new Map<string, SessionState>();

  constructor(
    private readonly maxTouched: number,
    private readonly maxSessions = MAX_SESSIONS,
  ) {}

  get(sessionID: string): SessionState {
    let state = this.states.get(sessionID);
    if (state === undefined) {
      state = new SessionState(this.maxTouched);
      if (this.states.size >= this.maxSessions) {
        const oldest = this.states.keys().next().value;
        if (oldest !== undefined) this.states.delete(oldest);
      }
    } else {
      this.states.delete(sessionID);
    }
    this.states.set(sessionID, state);
    return state;
  }

  delete(sessionID: string): void {
    this.states.delete(sessionID);
  }

  get size(): number {
    return this.states.size;
  }

  clear(): void {
    this.states.clear();
  }
}
