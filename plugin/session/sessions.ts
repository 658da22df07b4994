import { Session } from "./session.ts";

/**
 * Sessions remembered at once; past it the least recently used is forgotten (and rebuilt from its
 * history if it comes back). Each holds at most `maxTouchedDirs` paths.
 */
const MAX_SESSIONS = 256;

/** Per-session state, isolated by sessionID. `onForget` lets go of what the store holds for a session (its watches). */
export class Sessions {
  private readonly states = new Map<string, Session>();

  constructor(
    private readonly maxTouched: number,
    private readonly onForget: (sessionID: string) => void,
    private readonly maxSessions = MAX_SESSIONS,
    /** Sets up a session met for the first time (the pins every session gets). */
    private readonly onCreate: (session: Session) => void = () => {},
  ) {}

  get(sessionID: string): Session {
    let state = this.states.get(sessionID);
    if (state === undefined) {
      state = new Session(sessionID, this.maxTouched);
      this.onCreate(state);
      if (this.states.size >= this.maxSessions) {
        const oldest = this.states.keys().next().value;
        if (oldest !== undefined) this.delete(oldest);
      }
    } else {
      this.states.delete(sessionID);
    }
    this.states.set(sessionID, state);
    return state;
  }

  /** The session if this process knows it, without creating it or changing its recency. */
  peek(sessionID: string): Session | undefined {
    return this.states.get(sessionID);
  }

  delete(sessionID: string): void {
    if (this.states.delete(sessionID)) this.onForget(sessionID);
  }

  get size(): number {
    return this.states.size;
  }

  clear(): void {
    for (const id of [...this.states.keys()]) this.delete(id);
  }
}
