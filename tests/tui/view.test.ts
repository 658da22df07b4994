import { describe, expect, test } from "bun:test";
import fc from "fast-check";
import { RECORDS_VERSION, type FileRecord, type FileState, type RequestRecord, type SteerRequest } from "../../plugin/records/format.ts";
import { contextView, dialogEntries, fitStart, formatTokens, printable, SIDEBAR_WIDTH, sidebarLines, toggleAction } from "../../plugin/tui/view.ts";

const cells = (text: string) => Bun.stringWidth(text);

function file(path: string, state: FileState, tokens: number, total = tokens, extra: Partial<FileRecord> = {}): FileRecord {
  return { path, sha256: "0".repeat(64), tokens, total, mode: "touched", level: "direct", state, ...extra };
}

function record(files: FileRecord[], pins: string[] = [], time = "2026-01-01T00:00:10.000Z"): RequestRecord {
  return { v: RECORDS_VERSION, time, session: "ses_1", message: null, agent: "build", delivery: "stable", worktree: "/repo", pins, files };
}

const steer = (action: SteerRequest["action"], path: string, time: string): SteerRequest => ({ v: RECORDS_VERSION, time, action, path });

/** Paths as a hostile or huge monorepo names them. */
const hostilePath = fc.oneof(
  fc.string({ maxLength: 80 }),
  fc.string({ unit: "grapheme", maxLength: 40 }),
  fc.constantFrom(
    "packages/api/AGENTS.md",
    "../../etc/passwd",
    "a/\u001b[2J\u001b[31mred/AGENTS.md",
    "line\nbreak/AGENTS.md",
    "\u202eevil\u202c/AGENTS.md",
    "zero\u200bwidth/AGENTS.md",
    "路径/很长的目录/AGENTS.md",
    "emoji/😀👩‍👩‍👧/AGENTS.md",
    "\ud800lone/AGENTS.md",
    "x".repeat(5000),
    `${"deep/".repeat(400)}AGENTS.md`,
  ),
);
const state = fc.constantFrom<FileState>("system", "cut", "conversation", "host", "omitted", "unloaded");
const count = fc.oneof(fc.nat({ max: 2_000_000 }), fc.constantFrom(0, 999, 1000, 9999, 10_000, 999_999, 1_000_000));
const fileArb = fc.record({ path: hostilePath.filter((path) => path !== ""), state, tokens: count, total: count }).map(({ path, state, tokens, total }) => file(path, state, tokens, total));

describe("formatTokens and printable", () => {
  test("short counts, never more than five cells", () => {
    expect([0, 812, 999, 1000, 1234, 9999, 10_000, 123_456, 1_000_000, 12_345_678].map(formatTokens)).toEqual(["0", "812", "999", "1k", "1.2k", "9.9k", "10k", "123k", "1M", "12.3M"]);
    expect([-1, Number.NaN, Number.POSITIVE_INFINITY].map(formatTokens)).toEqual(["?", "?", "?"]);
    fc.assert(fc.property(fc.nat({ max: 99_999_999 }), (n) => expect(formatTokens(n).length).toBeLessThanOrEqual(5)));
  });

  test("escape sequences, line breaks, bidi and invisible characters never reach the terminal", () => {
    expect(printable("a/\u001b[31mred\nx\u202e\u200b")).toBe("a/\uFFFD[31mred\uFFFDx");
    fc.assert(
      fc.property(hostilePath, (path) => {
        const shown = printable(path);
        expect(shown).not.toMatch(/[\p{Cc}\p{Default_Ignorable_Code_Point}\p{Bidi_Control}]/u);
        expect(shown.length).toBeLessThanOrEqual(1025);
        if (path.length <= 1024) expect(printable(shown)).toBe(shown);
      }),
    );
  });
});

describe("fitStart", () => {
  test("keeps the end of a path, in at most the cells given", () => {
    expect(fitStart("packages/api/AGENTS.md", 40)).toBe("packages/api/AGENTS.md");
    expect(fitStart("packages/api/AGENTS.md", 12)).toBe("…i/AGENTS.md");
    expect(fitStart("路径/AGENTS.md", 11)).toBe("…/AGENTS.md");
    expect(fitStart("路径/AGENTS.md", 12)).toBe("…/AGENTS.md"); // a wide character does not fit in the one cell left
    expect(fitStart("abc", 0)).toBe("");
  });

  test("property: fits, and is the text itself or an ellipsis and a suffix of it", () => {
    fc.assert(
      fc.property(fc.string({ unit: "grapheme", maxLength: 60 }), fc.integer({ min: -2, max: 70 }), (text, width) => {
        const fitted = fitStart(text, width);
        expect(cells(fitted)).toBeLessThanOrEqual(Math.max(0, width));
        if (cells(text) <= width) expect(fitted).toBe(text);
        else if (fitted !== "") {
          expect(fitted.startsWith("…")).toBe(true);
          expect(text.endsWith(fitted.slice(1))).toBe(true);
        }
      }),
    );
  });
});

describe("contextView: the record and the pending steering requests", () => {
  test("no record and no request: nothing to show", () => {
    expect(contextView(undefined, [])).toBeUndefined();
    expect(sidebarLines(undefined).map((line) => line.text)).toEqual(["Project context", "no request recorded yet"]);
  });

  test("totals count the plugin's copies; cut and omitted files are counted and marked", () => {
    const view = contextView(
      record([file("packages/api/AGENTS.md", "conversation", 1234), file("AGENTS.md", "host", 0, 310), file("packages/web/AGENTS.md", "cut", 800, 2100, { left: 1300 }), file("services/billing/AGENTS.md", "omitted", 0, 640)]),
      [],
    )!;
    expect(view.tokens).toBe(2034);
    expect(view.cut).toBe(1);
    expect(view.omitted).toBe(1);
    const lines = sidebarLines(view);
    expect(lines.map((line) => [line.text, line.right ?? ""])).toEqual([
      ["Project context", ""],
      ["4 files · 2k tokens", ""],
      ["✂ 1 cut · … 1 omitted", ""],
      ["   packages/api/AGENTS.md", "1.2k"],
      ["·  AGENTS.md", "310"],
      ["✂  packages/web/AGENTS.md", "800/2.1k"],
      ["…  services/billing/AGENTS.md", "640"],
    ]);
    expect(lines[5]!.tone).toBe("warning");
  });

  test("a pin shows as pinned; a request newer than the record as pending; an older one is applied", () => {
    const view = contextView(record([file("a/AGENTS.md", "system", 10), file("b/AGENTS.md", "system", 20)], ["a/AGENTS.md", "docs"]), [
      steer("load", "b/AGENTS.md", "2026-01-01T00:00:05.000Z"), // before the record: applied (or refused) already
      steer("unload", "a/AGENTS.md", "2026-01-01T00:00:11.000Z"),
      steer("load", "c/AGENTS.md", "2026-01-01T00:00:12.000Z"),
      steer("unload", "c/AGENTS.md", "2026-01-01T00:00:13.000Z"),
    ])!;
    expect(view.rows.map((row) => [row.path, row.pinned, row.pending])).toEqual([
      ["a/AGENTS.md", true, "unload"],
      ["b/AGENTS.md", false, undefined],
    ]);
    // A pinned directory and a path asked for that the record does not list stay reachable, to unpin.
    expect(view.otherPins.map((row) => [row.path, row.pinned, row.pending])).toEqual([
      ["docs", true, undefined],
      ["c/AGENTS.md", false, "unload"],
    ]);
    expect(dialogEntries(view).map((entry) => [entry.path, entry.footer, entry.action])).toEqual([
      ["a/AGENTS.md", "unpin pending", "load"],
      ["b/AGENTS.md", "", "load"],
      ["docs", "pinned", "unload"],
      ["c/AGENTS.md", "unpin pending", "load"],
    ]);
    expect(sidebarLines(view).slice(2).map((line) => line.text)).toEqual([" ◇ a/AGENTS.md", "   b/AGENTS.md", " ◆ docs", " ◇ c/AGENTS.md"]);
  });

  test("property: pending is the last request after the record's time; selecting always asks for the other pin state", () => {
    const times = fc.integer({ min: 0, max: 20 }).map((second) => `2026-01-01T00:00:${String(second).padStart(2, "0")}.000Z`);
    const paths = fc.constantFrom<string>("a", "b", "c", "d");
    fc.assert(
      fc.property(
        fc.array(paths, { maxLength: 4 }),
        fc.uniqueArray(paths, { maxLength: 4 }),
        fc.array(fc.record({ action: fc.constantFrom<"load" | "unload">("load", "unload"), path: paths, time: times }), { maxLength: 12 }),
        times,
        (listed, pins, requests, recordTime) => {
          const steers = requests.map((request) => steer(request.action, request.path, request.time));
          const view = contextView(record([...new Set(listed)].map((path) => file(path, "system", 1)), pins, recordTime), steers)!;
          for (const row of [...view.rows, ...view.otherPins]) {
            const later = steers.filter((request) => request.path === row.path && request.time > recordTime);
            expect(row.pending).toBe(later.at(-1)?.action);
            expect(row.pinned).toBe(pins.includes(row.path));
            const pinnedAfter = row.pending === undefined ? row.pinned : row.pending === "load";
            expect(toggleAction(row)).toBe(pinnedAfter ? "unload" : "load");
          }
          // Every pin and every pending path is listed exactly once.
          const all = [...view.rows, ...view.otherPins].map((row) => row.path);
          expect(new Set(all).size).toBe(all.length);
          for (const path of [...pins, ...steers.filter((request) => request.time > recordTime).map((request) => request.path)]) expect(all).toContain(path);
        },
      ),
    );
  });

  test("entries that are not file records are left out; garbage never throws", () => {
    const files = [file("ok/AGENTS.md", "system", 5), { path: 42 }, null, { path: "", state: "system", tokens: 1, total: 1 }, { path: "x", state: "bogus", tokens: 1, total: 1 }, { path: "y", state: "cut", tokens: -1, total: 1 }];
    const view = contextView({ ...record([]), files: files as unknown as FileRecord[], pins: [7, "p"] as unknown as string[] }, [])!;
    expect(view.rows.map((row) => row.path)).toEqual(["ok/AGENTS.md"]);
    expect(view.otherPins.map((row) => row.path)).toEqual(["p"]);
    fc.assert(
      fc.property(fc.anything(), fc.anything(), (files, pins) => {
        const view = contextView({ ...record([]), time: "garbage", files: files as FileRecord[], pins: pins as string[] }, []);
        sidebarLines(view);
        dialogEntries(view);
      }),
    );
  });
});

describe("sidebarLines", () => {
  test("property: every line fits the sidebar, the rows are capped and the rest counted", () => {
    fc.assert(
      fc.property(fc.array(fileArb, { maxLength: 30 }), fc.array(hostilePath, { maxLength: 3 }), fc.integer({ min: 0, max: 15 }), (files, pins, maxRows) => {
        const view = contextView(record(files, pins), [])!;
        const lines = sidebarLines(view, maxRows);
        for (const line of lines) {
          expect(cells(line.text) + (line.right === undefined ? 0 : cells(line.right) + 1)).toBeLessThanOrEqual(SIDEBAR_WIDTH);
          expect(line.text).not.toMatch(/[\p{Cc}\p{Bidi_Control}]/u);
        }
        const listed = view.rows.length + view.otherPins.length;
        const shown = Math.min(listed, maxRows);
        expect(lines.length).toBe(2 + (view.cut + view.omitted > 0 ? 1 : 0) + shown + (listed > maxRows ? 1 : 0));
        if (listed > maxRows) expect(lines.at(-1)!.text).toBe(`+${listed - maxRows} more · /context`);
      }),
    );
  });

  test("a huge session: 20,000 files render 12 rows quickly", () => {
    const files = Array.from({ length: 20_000 }, (_, index) => file(`${"pkg/".repeat(index % 50)}m${index}/AGENTS.md`, index % 7 === 0 ? "omitted" : "system", index));
    const started = performance.now();
    const lines = sidebarLines(contextView(record(files), []));
    expect(performance.now() - started).toBeLessThan(500);
    expect(lines).toHaveLength(2 + 1 + 12 + 1);
    expect(lines.at(-1)!.text).toBe("+19988 more · /context");
  });
});
