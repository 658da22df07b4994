import { describe, expect, test } from "bun:test";
import fc from "fast-check";
import { watchNotice, type WatchChange } from "../../plugin/block/render.ts";
import { Session } from "../../plugin/session/session.ts";

const CHANGES: readonly WatchChange[] = ["created", "changed", "deleted"];
const subjects = ["a.md", "b.md", "c.md"];
const noticeOf = (target: string, change: WatchChange) => watchNotice("AGENTS.md", target, change);
const sameSubject = (target: string) => CHANGES.map((change) => noticeOf(target, change));

describe("Session.notify", () => {
  test("property: whatever is notified and told in whatever order, the last notice waiting of a subject is the last notified since it was told, and none waits twice in a row", () => {
    const event = fc.oneof(
      fc.record({ kind: fc.constant("notify" as const), target: fc.constantFrom(...subjects), change: fc.constantFrom(...CHANGES) }),
      fc.record({ kind: fc.constant("tell" as const), count: fc.nat(4) }),
    );
    fc.assert(
      fc.property(fc.array(event, { maxLength: 60 }), (events) => {
        const session = new Session("ses", 100);
        // What the model should learn: per subject, the last change notified and not told yet.
        const untold = new Map<string, string>();
        for (const step of events) {
          if (step.kind === "notify") {
            const notice = noticeOf(step.target, step.change);
            session.notify(notice, step.target);
            untold.set(step.target, notice);
          } else {
            for (const told of session.notices.splice(0, step.count)) {
              const target = subjects.find((subject) => sameSubject(subject).includes(told))!;
              // Told: it is no longer owed, unless a later notice of it still waits.
              if (!session.notices.some((waiting) => sameSubject(target).includes(waiting))) untold.delete(target);
            }
          }
        }
        for (const target of subjects) {
          const waiting = session.notices.filter((notice) => sameSubject(target).includes(notice));
          expect(waiting.at(-1)).toBe(untold.get(target));
          for (let i = 1; i < waiting.length; i++) expect(waiting[i]).not.toBe(waiting[i - 1]);
        }
      }),
    );
  });

  test("a subject's notices: repeated ones wait once, a change back waits beside them, other subjects are apart", () => {
    const session = new Session("ses", 100);
    for (let i = 0; i < 5; i++) session.notify(noticeOf("a.md", "changed"), "a.md");
    session.notify(noticeOf("b.md", "changed"), "b.md");
    session.notify(noticeOf("a.md", "deleted"), "a.md");
    session.notify(noticeOf("a.md", "created"), "a.md");
    session.notify(noticeOf("a.md", "created"), "a.md");
    expect(session.notices).toEqual([noticeOf("a.md", "changed"), noticeOf("b.md", "changed"), noticeOf("a.md", "deleted"), noticeOf("a.md", "created")]);
    // Told, a notice may wait again.
    session.notices.splice(0);
    session.notify(noticeOf("a.md", "created"), "a.md");
    expect(session.notices).toEqual([noticeOf("a.md", "created")]);
  });

  test("a queue that never empties (a new subject at every step, one told) keeps the subjects of what waits, not of all it ever held (found in review)", () => {
    const session = new Session("ses", 100);
    for (let i = 0; i < 10_000; i++) {
      session.notify(noticeOf(`f${i}.md`, "changed"), `f${i}.md`);
      if (session.notices.length > 1) session.notices.splice(0, 1);
    }
    expect(session.notices).toHaveLength(1);
    expect((session as unknown as { lastNotices: Map<string, unknown> }).lastNotices.size).toBeLessThanOrEqual(2 * session.notices.length + 65);
    // What waits is still matched: the same notice is not queued again.
    session.notify(noticeOf("f9999.md", "changed"), "f9999.md");
    expect(session.notices).toHaveLength(1);
  });
});
