import { describe, expect, test } from "bun:test";
import fc from "fast-check";
import { boundaries, toDoc, type Doc } from "../../plugin/block/doc.ts";
import { CRITICAL_TIER, plan, type BlockKind, type Decision, type Plan, type PlanInput, type PlanItem } from "../../plugin/block/plan.ts";
import { cutTail, renderBlock, renderPieces, sectionHead } from "../../plugin/block/render.ts";
import { splitUnits } from "../../plugin/block/units.ts";
import { largestStall } from "../helpers/stall.ts";
import { endsInFence } from "../helpers/fence.ts";

/** The counter for these tests (a parameter of planning, not a mock): a unit costs ceil(UTF-8 bytes / 4). */
const unitCost = (unit: string) => Math.ceil(Buffer.byteLength(unit) / 4);
const frame = (text: string) => splitUnits(text).reduce((total, unit) => total + unitCost(unit), 0);
/** A looser upper bound, as production's frame is: proves less, must decide the same. */
const looseFrame = (text: string) => splitUnits(text).reduce((total, unit) => total + Math.ceil(Buffer.byteLength(unit) / 3), 0);
const countsOf = (doc: Doc) => Int32Array.from(doc.units, unitCost);
const sum = (counts: Int32Array) => counts.reduce((total, count) => total + count, 0);

function planned(input: PlanInput): Plan {
  const result = plan(input);
  if ("need" in result) throw new Error("all counts were given");
  return result;
}

/** What the block costs: framing at `frame`, file text at the exact counts of the units it keeps. */
function cost(input: Omit<PlanInput, "budget">, result: Plan): number {
  return renderPieces(input, result).reduce((total, piece) => {
    if (piece.item === undefined) return total + input.frame(piece.text);
    return total + sum(input.items[piece.item]!.counts!.slice(0, piece.units));
  }, 0);
}

function cutAt(item: PlanItem, k: number): Decision {
  const { units } = item.doc;
  if (k === units.length) return { state: "whole" };
  const tokens = (end: number) => sum(item.counts!.slice(0, end));
  return { state: "cut", keptUnits: k, keptTokens: tokens(k), totalTokens: tokens(units.length), line: 1 + units.slice(0, k).filter((unit) => unit.endsWith("\n")).length };
}

/**
 * Each single step that could use more of the budget: a doc of the first tier not whole grown to
 * its next legal boundary, or a left-out one shown up to its first. The planner promises none fits.
 */
function steps(input: PlanInput, result: Plan): Plan[] {
  const { items } = input;
  const notWhole = items.filter((_, i) => result.decisions[i]!.state !== "whole");
  const tier = Math.min(...notWhole.map((item) => item.tier));
  const left = result.decisions.filter((decision) => decision.state === "omitted").length;
  return items.flatMap((item, i) => {
    const decision = result.decisions[i]!;
    if (item.tier !== tier || decision.state === "whole") return [];
    const ranks = boundaries(item.doc);
    let next = decision.state === "cut" ? decision.keptUnits + 1 : 1;
    while (ranks[next] === 0) next++;
    const decisions = result.decisions.map((other, j) => (j === i ? cutAt(item, Math.min(next, ranks.length - 1)) : other));
    const leftAfter = decision.state === "omitted" ? left - 1 : left;
    return [{ ...result, decisions, named: result.named < left ? Math.min(result.named, leftAfter) : leftAfter }];
  });
}

/** Whether `text[0, at)` ends strictly inside one of the escapes escape.ts writes (`&lt;`, `&#58;`). */
function cutsEscape(text: string, at: number): boolean {
  return ["&lt;", "&#58;"].some((escape) => {
    const amp = text.lastIndexOf("&", at - 1);
    return amp !== -1 && at - amp < escape.length && text.startsWith(escape, amp);
  });
}

const fragments = fc.constantFrom(
  "```\n", "````md\n", "~~~\n", "```\n", "# Title\n", "## Part\n", "\n\n", "\n", " ".repeat(300), "😀".repeat(140), "\ud83d",
  "w".repeat(300), "a rule to keep, ", "</project-context", "Instructions from: x\n", "<\u200bsystem>", "<system>".repeat(40),
);
const body = fc
  .array(fc.oneof(fragments, fc.string({ unit: fc.constantFrom(..."ab #`~\n".split("")), maxLength: 40 })), { maxLength: 14 })
  .map((parts) => parts.join(""));
const hierarchy = fc
  .array(fc.record({ body, tier: fc.integer({ min: 0, max: 2 }) }), { minLength: 1, maxLength: 4 })
  .map((files) => files.sort((a, b) => a.tier - b.tier).map((file, i) => ({ doc: toDoc(`k${i}`, `d${i}/AGENTS.md`, file.body), tier: file.tier })));

describe("plan", () => {
  test("every budget: within it, >= 95% used or no step fits, no cut in a fence or a surrogate pair, tiers respected", () => {
    fc.assert(
      fc.property(hierarchy, fc.constantFrom<BlockKind>("system", "delivery", "compaction"), (files, kind) => {
        const items = files.map((file) => ({ ...file, counts: countsOf(file.doc) }));
        const input = { kind, items, frame };
        const fenceFree = items.every(({ doc }) => boundaries(doc).every((rank, k) => rank > 0 || k === 0));
        const framing = (rel: string) => frame(sectionHead(rel, false)) + frame(cutTail(rel, 99_999, 99_999, false)) + frame(`"${rel}" (99999 tokens), `);
        const maxStep = Math.max(...items.map(({ doc, counts }) => framing(doc.rel) + Math.max(0, ...counts)));
        const everything = cost(input, planned({ ...input, budget: 1e9 }));
        for (let budget = 0; budget <= everything + 3; budget++) {
          const result = planned({ ...input, budget });
          const used = cost(input, result);
          const all = { ...input, budget };
          expect(used).toBeLessThanOrEqual(budget);
          if (budget >= everything) expect(result.decisions.every((decision) => decision.state === "whole")).toBe(true);
          if (result.empty) {
            const bare = { decisions: items.map((item) => ({ state: "omitted" as const, totalTokens: sum(item.counts) })), named: 0, empty: false };
            expect(cost(all, bare)).toBeGreaterThan(budget);
          } else if (kind !== "compaction" && used < budget * 0.95 && budget < everything) {
            for (const step of steps(all, result)) expect(cost(all, step)).toBeGreaterThan(budget);
            if (fenceFree) expect(used).toBeGreaterThanOrEqual(budget - maxStep);
          }
          result.decisions.forEach((decision, i) => {
            if (decision.state !== "cut") return;
            const { units } = items[i]!.doc;
            const kept = units.slice(0, decision.keptUnits).join("");
            expect(endsInFence(kept)).toBe(false);
            expect(/[\ud800-\udbff]$/.test(kept) && /^[\udc00-\udfff]/.test(units[decision.keptUnits]!)).toBe(false);
            expect(cutsEscape(units.join(""), kept.length)).toBe(false);
          });
          if (kind === "compaction") continue;
          const omittedTiers = items.filter((_, i) => result.decisions[i]!.state === "omitted").map((item) => item.tier);
          const shownTiers = items.filter((_, i) => result.decisions[i]!.state !== "omitted").map((item) => item.tier);
          expect(shownTiers.every((tier) => omittedTiers.every((omitted) => tier <= omitted))).toBe(true);
        }
      }),
      { numRuns: 60 },
    );
  });

  test("realistic markdown, fence-free: >= 95% of every budget that is 20 steps or more", () => {
    const word = fc.constantFrom("keep", "the", "tests", "green", "before", "every", "commit", "and", "imports", "sorted", "by", "module");
    const line = fc.array(word, { minLength: 3, maxLength: 16 }).map((words) => words.join(" "));
    const block = fc.oneof(line.map((text) => `## ${text}\n`), fc.array(line, { minLength: 1, maxLength: 6 }).map((lines) => `${lines.join("\n")}\n\n`));
    const markdown = fc.array(fc.record({ blocks: fc.array(block, { minLength: 30, maxLength: 80 }), tier: fc.integer({ min: 0, max: 1 }) }), { minLength: 2, maxLength: 5 });
    fc.assert(
      fc.property(markdown, fc.constantFrom<BlockKind>("system", "delivery"), (files, kind) => {
        const items = files
          .sort((a, b) => a.tier - b.tier)
          .map((file, i) => {
            const doc = toDoc(`k${i}`, `d${i}/AGENTS.md`, file.blocks.join(""));
            return { doc, tier: file.tier, counts: countsOf(doc) };
          });
        const input = { kind, items, frame };
        const step = Math.max(...items.map(({ doc, counts }) => frame(sectionHead(doc.rel, false)) + frame(cutTail(doc.rel, 99_999, 99_999, false)) + Math.max(0, ...counts) + 8));
        const everything = cost(input, planned({ ...input, budget: 1e9 }));
        for (let budget = 20 * step; budget < everything; budget += 7) {
          expect(cost(input, planned({ ...input, budget }))).toBeGreaterThanOrEqual(0.95 * budget);
        }
      }),
      { numRuns: 15 },
    );
  });

  test("determinism: the same decisions and bytes whichever counts are supplied beyond those needed", () => {
    const kind = fc.constantFrom<BlockKind>("system", "delivery", "compaction");
    fc.assert(
      fc.property(hierarchy, fc.array(fc.boolean(), { minLength: 4, maxLength: 4 }), fc.integer({ min: 0, max: 3000 }), kind, fc.boolean(), (files, known, budget, kind, bounded) => {
        const full = files.map((file) => ({ ...file, counts: countsOf(file.doc) }));
        // The caller's own bound of a doc (compose gives one for each version) or the plan's: the same decisions.
        const uncounted = (file: PlanItem): PlanItem => (bounded ? { ...file, bound: looseFrame(file.doc.units.join("")) } : file);
        const partial: PlanItem[] = files.map((file, i) => (known[i] ? { ...file, counts: countsOf(file.doc) } : uncounted(file)));
        const input = { kind, frame: looseFrame, budget };
        const expected = planned({ ...input, items: full });
        let result = plan({ ...input, items: partial });
        if ("need" in result) {
          expect(result.need).toEqual(partial.filter((item) => item.counts === undefined).map((item) => item.doc));
          result = plan({ ...input, items: full });
        }
        expect(result).toEqual(expected);
        if ("need" in result) throw new Error("unreachable");
        expect(renderBlock({ ...input, items: partial }, result)).toBe(renderBlock({ ...input, items: full }, expected));
      }),
      { numRuns: 400 },
    );
  });

  test("compaction names the most files that fit beside nothing shown (every file, else a scan from none up, is the reference)", () => {
    const many = fc
      .array(fc.record({ body, tier: fc.constant(0) }), { minLength: 1, maxLength: 30 })
      .map((files) => files.map((file, i) => ({ doc: toDoc(`k${i}`, `${"d".repeat(i % 7)}${i}/AGENTS.md`, file.body), tier: 0 })));
    fc.assert(
      fc.property(many, fc.integer({ min: 0, max: 1500 }), (files, budget) => {
        const items = files.map((file) => ({ ...file, counts: countsOf(file.doc) }));
        const input = { kind: "compaction" as const, items, frame, budget };
        const result = planned(input);
        const bare = (named: number): Plan => ({ decisions: items.map((item) => ({ state: "omitted" as const, totalTokens: sum(item.counts) })), named, empty: false });
        // As before 0.3.7: every file named when that fits (it drops the "and 1 more" entry, so it can
        // cost less than naming all but one), else the most that fit counting up from none.
        let fit = -1;
        if (cost(input, bare(items.length)) <= budget) fit = items.length;
        else while (fit < items.length && cost(input, bare(fit + 1)) <= budget) fit++;
        if (fit === -1) return expect(result.empty).toBe(true);
        const left = result.decisions.filter((decision) => decision.state === "omitted").length;
        expect(result.named).toBe(Math.min(fit, left));
      }),
      { numRuns: 300 },
    );
  });

  test("naming every file can cost less than naming all but one: two short paths at budgets 71-74 are both named", () => {
    const items = ["a", "b"].map((rel) => {
      const doc = toDoc(rel, rel, "x".repeat(401));
      return { doc, tier: 0, counts: countsOf(doc) };
    });
    for (let budget = 71; budget <= 74; budget++) expect(planned({ kind: "compaction", items, frame, budget }).named).toBe(2);
  });

  test("a compaction copy of 2,000 files frames less than one list naming them all, and makes units only for what it weighs", () => {
    const asked = new Set<number>();
    const items = Array.from({ length: 2000 }, (_, i) => {
      const made = toDoc(`k${i}`, `packages/p${i}/src/AGENTS.md`, `rule ${i}: keep it\n`.repeat(20));
      // A doc whose units say when they are asked for (compose's docs make them on demand).
      const doc: Doc = { key: made.key, rel: made.rel, lead: made.lead, size: made.size, get units() { asked.add(i); return made.units; } };
      return { doc, tier: 0, counts: countsOf(made) };
    });
    let framed = 0; // of the lists of files left out
    const counting = (text: string) => ((framed += text.startsWith("[not included") ? text.length : 0), frame(text));
    const result = planned({ kind: "compaction", items, frame: counting, budget: 1000 });
    const shown = result.decisions.flatMap((decision, i) => (decision.state === "omitted" ? [] : [i]));
    expect(result.named).toBeGreaterThan(0);
    // Units only of the files shown and of the first that is not (compaction weighs a cut of that one only).
    expect([...asked].filter((i) => !shown.includes(i)).length).toBeLessThanOrEqual(1);
    const everyName = items.map(({ doc }) => `"${doc.rel}" (100 tokens)`).join(", ");
    expect(framed).toBeLessThan(everyName.length);
  });

  test("a doc's head is framed once for a counter: a second plan of the same docs frames none", () => {
    const items = Array.from({ length: 50 }, (_, i) => {
      const doc = toDoc(`k${i}`, `p${i}/AGENTS.md`, `rule ${i}\n`.repeat(30));
      return { doc, tier: i % 3, counts: countsOf(doc) };
    });
    const heads = new Set(items.map(({ doc }) => sectionHead(doc.rel, false)));
    let framedHeads = 0;
    const counting = (text: string) => ((framedHeads += heads.has(text) ? 1 : 0), frame(text));
    const first = planned({ kind: "system", items, frame: counting, budget: 600 });
    expect(framedHeads).toBe(50);
    expect(planned({ kind: "system", items, frame: counting, budget: 600 })).toEqual(first);
    expect(framedHeads).toBe(50);
  });

  test("asks for no counts when upper bounds prove everything fits", () => {
    const items = [{ doc: toDoc("a", "AGENTS.md", "rule\n".repeat(50)), tier: 0 }];
    expect("need" in plan({ kind: "system", items, frame, budget: 1000 })).toBe(false);
    expect(plan({ kind: "system", items, frame, budget: 100 })).toEqual({ need: [items[0]!.doc] });
  });

  test("boundaries: headings, paragraph ends, lines, chunks, never inside a fence", () => {
    const doc = toDoc("a", "AGENTS.md", ["# A", "text", "", "para", "````", "```", "# not a heading", "````", "after", "## B", "w ".repeat(150).trim()].join("\n"));
    // Units: one per line, a blank line joined to the line before it (o200k's pieces run over it),
    // the last line in two chunks; a shorter ``` does not close a ```` fence.
    expect([...boundaries(doc)]).toEqual([0, 2, 3, 2, 0, 0, 0, 2, 4, 2, 1, 4]);
    const unclosed = toDoc("b", "AGENTS.md", "intro\n~~~~\ncode\n~~~\nmore\n");
    expect([...boundaries(unclosed)]).toEqual([0, 2, 0, 0, 0, 4]);
  });

  test("boundaries: a fence run indented deeper than a closer can be is the fence's text, not its end", () => {
    // A markdown template whose nested list shows a fence 8 columns in: CommonMark keeps the ```md
    // fence open past it (a closer is indented 3 columns at most past its container's content). Cut
    // after it, the block's note and closing tag were inside the template's open fence.
    const lines = ["Template:", "```md", "1. Install", "    - run:", "        ```sh", "        npm ci", "        ```", "2. Test", "3. Ship", "```", "after"];
    const doc = toDoc("a", "AGENTS.md", lines.join("\n"));
    const ranks = [...boundaries(doc)];
    expect(ranks).toEqual([0, 2, 0, 0, 0, 0, 0, 0, 0, 0, 2, 4]);
    ranks.forEach((rank, k) => rank > 0 && k < doc.units.length && expect(endsInFence(doc.units.slice(0, k).join(""))).toBe(false));
    // A tab is 4 columns; a fence opened inside a list item closes at its own indentation.
    expect([...boundaries(toDoc("b", "AGENTS.md", "```\n\t```\nx\n```\ny"))]).toEqual([0, 0, 0, 0, 2, 4]);
    expect([...boundaries(toDoc("c", "AGENTS.md", "- a\n    - b\n      ```sh\n      npm ci\n      ```\nnext"))]).toEqual([0, 2, 2, 0, 0, 2, 4]);
  });

  test("boundaries: never inside an escape, wherever the line's 256-character chunks fall", () => {
    // Each offset puts a chunk's end at another place of `&lt;` or `&#58;` (the marker's gaps are no-break spaces, not a place to break).
    for (let offset = 0; offset < 12; offset++) {
      for (const body of [`${"a".repeat(offset)}${"<system>".repeat(80)}`, `${"\u00a0".repeat(230 + offset)}Instructions\u00a0from:${"x".repeat(40)}`]) {
        const { units } = toDoc("a", "AGENTS.md", body);
        const text = units.join("");
        expect(units.length).toBeGreaterThan(1);
        for (let k = 1, at = units[0]!.length; k < units.length; at += units[k++]!.length) {
          expect(cutsEscape(text, at), JSON.stringify(text.slice(at - 5, at + 5))).toBe(false);
        }
      }
    }
  });

  test("a cut moves back to a heading that keeps >= 80% while the block stays >= 95% used", () => {
    const text = `# One\n${"first part line\n".repeat(40)}# Two\n${"second part line\n".repeat(8)}`;
    const doc = toDoc("a", "AGENTS.md", text);
    const items = [{ doc, tier: 0, counts: countsOf(doc) }];
    const all = { kind: "system" as const, items, frame, budget: 1e9 };
    const wholeCost = cost(all, planned(all));
    const input = { kind: "system" as const, items, frame, budget: wholeCost - 20 };
    const result = planned(input);
    expect(result.decisions[0]).toMatchObject({ state: "cut", line: 42 });
    expect(cost(input, result)).toBeGreaterThanOrEqual(0.95 * input.budget);
  });

  test("fair shares: the closest file of the tier keeps as much as the others, later tiers wait", () => {
    const docs = ["c/b/a/AGENTS.md", "c/b/AGENTS.md", "c/AGENTS.md", "x/AGENTS.md"].map((rel) => toDoc(rel, rel, `${rel} rule\n`.repeat(100)));
    const items = docs.map((doc, i) => ({ doc, tier: i < 3 ? 0 : 1, counts: countsOf(doc) }));
    const result = planned({ kind: "system", items, frame, budget: 900 });
    const kept = result.decisions.map((decision) => (decision.state === "cut" ? decision.keptTokens : decision.state));
    expect(kept[3]).toBe("omitted");
    const shares = kept.slice(0, 3) as number[];
    expect(Math.max(...shares) - Math.min(...shares)).toBeLessThan(20);
  });
});

const criticalBody = fc.array(fc.constantFrom("rule line here\n", "## Head\n", "\n\n", "w".repeat(120), "keep it short. "), { minLength: 1, maxLength: 12 }).map((p) => p.join(""));
const criticalFiles = fc
  .record({
    critical: fc.array(criticalBody, { minLength: 1, maxLength: 3 }),
    others: fc.array(fc.record({ body: criticalBody, tier: fc.constantFrom(-1, 0, 1, Number.MAX_SAFE_INTEGER), name: fc.integer({ min: 1, max: 40 }) }), { minLength: 30, maxLength: 90 }),
  })
  .map(({ critical, others }) => {
    const crit = critical.map((b, i) => ({ doc: toDoc(`c${i}`, `crit${i}/AGENTS.md`, b), tier: CRITICAL_TIER }));
    const rest = others.sort((a, b) => a.tier - b.tier).map((f, i) => ({ doc: toDoc(`o${i}`, `${"p".repeat(f.name)}${i}/AGENTS.md`, f.body), tier: f.tier }));
    return [...crit, ...rest].map((item) => ({ ...item, counts: countsOf(item.doc) }));
  });

// Found in review (0.3.16): critical tiers stay whole beside a list naming as few as it must.
describe("critical tier properties", () => {
  for (const kind of ["system", "delivery", "compaction"] as BlockKind[]) {
    test(`${kind}: critical whole, within budget, not empty, tiers, 95% or no step`, () => {
      fc.assert(
        fc.property(criticalFiles, fc.integer({ min: 0, max: 400 }), fc.integer({ min: 0, max: 3000 }), (items, extra, raw) => {
          const input = { kind, items, frame };
          const bare: Plan = { decisions: items.map((it) => (it.tier === CRITICAL_TIER ? { state: "whole" as const } : { state: "omitted" as const, totalTokens: sum(it.counts) })), named: 0, empty: false };
          const need = cost(input, bare);
          const everything = cost(input, planned({ ...input, budget: 1e9 }));
          for (const budget of [need + extra, need + (raw % Math.max(1, everything - need + 1))]) {
            if (budget >= everything) continue;
            const all = { ...input, budget };
            const r = planned(all);
            const used = cost(input, r);
            expect(r.empty).toBe(false);
            items.forEach((it, i) => { if (it.tier === CRITICAL_TIER) expect(r.decisions[i]!.state).toBe("whole"); });
            expect(used).toBeLessThanOrEqual(budget);
            const left = r.decisions.filter((d) => d.state === "omitted").length;
            expect(r.named).toBeLessThanOrEqual(left);
            if (kind === "compaction") continue;
            const om = items.filter((_, i) => r.decisions[i]!.state === "omitted").map((it) => it.tier);
            const sh = items.filter((_, i) => r.decisions[i]!.state !== "omitted").map((it) => it.tier);
            expect(sh.every((t) => om.every((o) => t <= o))).toBe(true);
            if (used < budget * 0.95) for (const s of steps(all, r)) expect(cost(all, s)).toBeGreaterThan(budget);
          }
        }),
        { numRuns: 300 },
      );
    });
  }
});

test("critical tiers: decisions do not depend on which counts are supplied", () => {
  fc.assert(
    fc.property(
      fc.array(fc.record({ body: criticalBody, tier: fc.constantFrom(CRITICAL_TIER, -1, 0, 1, Number.MAX_SAFE_INTEGER), known: fc.boolean(), name: fc.integer({ min: 1, max: 30 }) }), { minLength: 1, maxLength: 60 }),
      fc.integer({ min: 0, max: 4000 }),
      fc.constantFrom<BlockKind>("system", "delivery", "compaction"),
      (files, budget, kind) => {
        const sorted = files.sort((a, b) => a.tier - b.tier);
        const docs = sorted.map((f, i) => ({ doc: toDoc(`k${i}`, `${"q".repeat(f.name)}${i}/AGENTS.md`, f.body), tier: f.tier }));
        const full: PlanItem[] = docs.map((d) => ({ ...d, counts: countsOf(d.doc) }));
        const partial: PlanItem[] = docs.map((d, i) => (sorted[i]!.known ? { ...d, counts: countsOf(d.doc) } : { ...d, bound: looseFrame(d.doc.units.join("")) }));
        const expected = plan({ kind, items: full, budget, frame: looseFrame });
        let result = plan({ kind, items: partial, budget, frame: looseFrame });
        if ("need" in result) result = plan({ kind, items: full, budget, frame: looseFrame });
        expect(result).toEqual(expected);
      },
    ),
    { numRuns: 500 },
  );
});

describe("planning many tiers", () => {
  test("12,000 one-file tiers, most of them fitting, plan in time linear in the tiers (641 ms in one task when each tier filtered every doc)", async () => {
    // A session's hierarchy gives each touched directory's new files a tier of their own: thousands of
    // them in a long session (or one continued with its history), with a system budget that fits most.
    const items = Array.from({ length: 12_000 }, (_, i) => {
      const doc = toDoc(`k${i}`, `d${i}/AGENTS.md`, "- a rule\n");
      return { doc, tier: i, counts: countsOf(doc) };
    });
    const { result, stallMs } = await largestStall(async () => planned({ kind: "system", items, budget: 150_000, frame }));
    const whole = result.decisions.filter((decision) => decision.state === "whole").length;
    // Tiers in order, each whole while it fits: a prefix of the docs.
    expect(whole).toBeGreaterThan(8_000);
    expect(result.decisions.slice(0, whole).every((decision) => decision.state === "whole")).toBe(true);
    // 120 ms here after the fix (a scan of the list's names per tier stays): the bound is for a loaded machine.
    expect(stallMs).toBeLessThan(350);
  }, 30_000);
});
