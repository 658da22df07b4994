import { describe, expect, test } from "bun:test";
import { Session } from "../../plugin/session/session.ts";

const block = "<project-context>\n<context-file path=\"a/AGENTS.md\">\nA\n</context-file>\n</project-context>";
const whole = (carrier: string) => ({ sha256: "s1", held: "whole" as const, carrier, dir: "/w/a" });

describe("Session: the digests of a carrier's blocks", () => {
  test("kept while the carrier holds a file again, let go once it holds nothing (found in review)", () => {
    const session = new Session("s", 10);
    session.hold("/w/a/AGENTS.md", whole("call_0"));
    session.delivered("call_0", block);
    // The same file held again by the same carrier (a restore meeting it twice under a reused id).
    session.hold("/w/a/AGENTS.md", whole("call_0"));
    expect(session.deliveredOn("call_0", block)).toBe(true);
    // Held by another carrier now: call_0 holds nothing, and its digests go.
    session.hold("/w/a/AGENTS.md", whole("call_1"));
    expect(session.deliveredOn("call_0", block)).toBe(false);
    expect(session.deliveredOn("call_0", `${block} `)).toBe(false);
  });
});
