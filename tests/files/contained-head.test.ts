import { afterEach, describe, expect, test } from "bun:test";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { decodeText, readContainedHead, type HeadOutcome } from "../../plugin/files/contained.ts";
import { Scratch } from "./helpers.ts";

const scratch = new Scratch();
afterEach(() => scratch.cleanup());
const HEAD = 4096;

function headOf(outcome: HeadOutcome): { text: string; truncated: boolean } {
  if (outcome.kind !== "head") throw new Error(`expected a head, got ${JSON.stringify(outcome)}`);
  return { text: Buffer.from(outcome.bytes).toString("latin1"), truncated: outcome.truncated };
}

describe("readContainedHead", () => {
  test("the first bytes, and whether the file goes on past them; the whole of a shorter file", () => {
    const root = scratch.dir();
    scratch.write(root, { "short.md": "---\nx\n", "exact.md": "a".repeat(HEAD), "long.md": `${"b".repeat(HEAD)}tail`, "empty.md": "" });
    expect(headOf(readContainedHead(join(root, "short.md"), root, HEAD))).toEqual({ text: "---\nx\n", truncated: false });
    expect(headOf(readContainedHead(join(root, "exact.md"), root, HEAD))).toEqual({ text: "a".repeat(HEAD), truncated: false });
    expect(headOf(readContainedHead(join(root, "long.md"), root, HEAD))).toEqual({ text: "b".repeat(HEAD), truncated: true });
    expect(headOf(readContainedHead(join(root, "empty.md"), root, HEAD))).toEqual({ text: "", truncated: false });
  });

  test("bytes come back undecoded: NUL bytes and invalid UTF-8 are for decodeText to refuse", () => {
    const root = scratch.dir();
    writeFileSync(join(root, "bad.md"), new Uint8Array([0x2d, 0x2d, 0x2d, 0x0a, 0xff, 0x0a]));
    writeFileSync(join(root, "bin.md"), new Uint8Array([0x2d, 0x2d, 0x2d, 0x00]));
    const bad = readContainedHead(join(root, "bad.md"), root, HEAD);
    const bin = readContainedHead(join(root, "bin.md"), root, HEAD);
    if (bad.kind !== "head" || bin.kind !== "head") throw new Error("expected heads");
    expect([...bad.bytes]).toEqual([0x2d, 0x2d, 0x2d, 0x0a, 0xff, 0x0a]);
    expect(decodeText(bad.bytes, bad.truncated)).toEqual({ kind: "refused", reason: "not valid UTF-8" });
    expect(decodeText(bin.bytes, bin.truncated)).toEqual({ kind: "refused", reason: "binary (contains NUL bytes)" });
  });

  test("a head cut inside a multi-byte character decodes without it; a whole file ending inside one is refused", () => {
    const root = scratch.dir();
    // 4095 ASCII bytes, then a 3-byte character straddling the head's end.
    scratch.write(root, { "AGENTS.md": `---\n${"a".repeat(HEAD - 5)}€tail` });
    const head = readContainedHead(join(root, "AGENTS.md"), root, HEAD);
    if (head.kind !== "head") throw new Error("expected a head");
    expect(head).toMatchObject({ truncated: true });
    expect(head.bytes.length).toBe(HEAD);
    expect(decodeText(head.bytes, head.truncated)).toEqual({ kind: "text", text: `---\n${"a".repeat(HEAD - 5)}` });
    expect(decodeText(head.bytes, false)).toEqual({ kind: "refused", reason: "not valid UTF-8" });
  });
});
