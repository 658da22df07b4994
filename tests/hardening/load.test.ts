/**
 * Load: 100 sessions stepping concurrently through one plugin instance, 1,000 steps each, with
 * seeded random touches of shared and private directories. Checked at every step: a session sees
 * only its own private directories, its newest touch is in its block, and its touched set never
 * holds more than maxTouchedDirs directories. Then memory, eviction order and session.deleted.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdir, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { sectionPaths, start, tempProject, type Started } from "../helpers/harness.ts";
import { figures } from "./figures.ts";
import { after } from "./util.ts";

const SESSIONS = Number(process.env.HARDENING_LOAD_SESSIONS ?? 100);
const STEPS = Number(process.env.HARDENING_LOAD_STEPS ?? 1000);
const SHARED = 20;
const PRIVATE = 12;
const FRESH = 9;
const MAX_TOUCHED = 8;
const MB = 1024 * 1024;

/** mulberry32: a small seeded PRNG, so a failure replays exactly. */
function random(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const heap = () => {
  Bun.gc(true);
  return process.memoryUsage().heapUsed;
};

let root: string;
let cleanup: () => Promise<void>;

beforeAll(async () => {
  ({ root, cleanup } = await tempProject());
  await writeFile(join(root, "AGENTS.md"), "# root\nROOT\n");
  const files: Promise<void>[] = [];
  const put = async (dir: string, text: string) => {
    await mkdir(join(root, dir), { recursive: true });
    await writeFile(join(root, dir, "AGENTS.md"), `# ${dir}\n${text}\n`);
  };
  for (let i = 0; i < SHARED; i++) files.push(put(`shared/d${i}`, `SHARED-${i}`));
  for (let s = 0; s < SESSIONS; s++) {
    for (let p = 0; p < PRIVATE; p++) files.push(put(`private/s${s}/p${p}`, `PRIVATE-${s}-${p}`));
    for (let f = 0; f < FRESH; f++) files.push(put(`fresh/s${s}/f${f}`, `FRESH-${s}-${f}`));
  }
  await Promise.all(files);
});

afterAll(() => cleanup(), 20_000);

/** The session a section path belongs to, if it is a private one. */
const owner = (path: string) => /^(?:private|fresh)\/s(\d+)\//.exec(path)?.[1];
/** The touched directory a section stands for (its leaf directory), for the private and shared ones. */
const leaf = (path: string) => path.replace(/\/AGENTS\.md$/, "");

describe("load", () => {
  let plugin: Started;
  beforeAll(async () => {
    // delivery "system": the block is rebuilt every step, so every step's block shows the whole state.
    plugin = await start(root, { maxTouchedDirs: MAX_TOUCHED, delivery: "system" });
  });
  afterAll(async () => {
    const began = performance.now();
    await plugin.dispose();
    figures.record("loadDispose", { ms: Math.round(performance.now() - began) });
  }, 20_000);

  test(`${SESSIONS} concurrent sessions x ${STEPS} steps: isolated, bounded, newest touch always shown`, async () => {
    // Warm up (tokenizer load, first reads) outside the measurement.
    await plugin.touch("warm", "read", { filePath: "shared/d0/x.ts" });
    await plugin.step("warm");
    const heapBefore = heap();
    const began = performance.now();
    let touches = 0;
    let stepsDone = 0;
    let maxLeaves = 0;
    const problems: string[] = [];
    const session = async (index: number) => {
      const id = `ses_load_${index}`;
      const rand = random(0xc0ffee + index);
      let newest: string | undefined;
      for (let step = 0; step < STEPS; step++) {
        if (rand() < 0.15) {
          const dir = rand() < 0.5 ? `shared/d${Math.floor(rand() * SHARED)}` : `private/s${index}/p${Math.floor(rand() * PRIVATE)}`;
          const tool = ["read", "edit", "glob", "bash"][Math.floor(rand() * 4)]!;
          const args = tool === "glob" ? { path: dir } : tool === "bash" ? { workdir: join(root, dir) } : { filePath: `${dir}/file${step}.ts` };
          await plugin.touch(id, tool, args);
          await after(plugin.hooks, id, tool, args);
          newest = dir;
          touches++;
        }
        const block = (await plugin.step(id)) ?? "";
        stepsDone++;
        const paths = sectionPaths(block);
        const foreign = paths.filter((path) => owner(path) !== undefined && owner(path) !== String(index));
        if (foreign.length > 0) problems.push(`${id} step ${step} sees ${foreign.join(", ")}`);
        if (newest !== undefined && !paths.includes(`${newest}/AGENTS.md`)) problems.push(`${id} step ${step}: newest touch ${newest} missing`);
        const leaves = paths.filter((path) => path !== "AGENTS.md").length;
        maxLeaves = Math.max(maxLeaves, leaves);
        if (leaves > MAX_TOUCHED) problems.push(`${id} step ${step}: ${leaves} touched directories shown, over ${MAX_TOUCHED}`);
        if (problems.length > 20) throw new Error(problems.join("\n"));
      }
    };
    await Promise.all(Array.from({ length: SESSIONS }, (_, index) => session(index)));
    const ms = performance.now() - began;
    const heapAfter = heap();
    expect(problems).toEqual([]);
    expect(maxLeaves).toBe(MAX_TOUCHED);
    figures.record("load", {
      sessions: SESSIONS,
      stepsPerSession: STEPS,
      steps: stepsDone,
      touches,
      ms: Math.round(ms),
      heapGrowthBytes: heapAfter - heapBefore,
      crossSessionLeaks: problems.length,
    });
    expect(stepsDone).toBe(SESSIONS * STEPS);
    expect(heapAfter - heapBefore).toBeLessThan(64 * MB);
  }, 60_000);

  test("past maxTouchedDirs the oldest touches are forgotten first", async () => {
    const ids = Array.from({ length: SESSIONS }, (_, index) => index);
    await Promise.all(
      ids.map(async (index) => {
        const id = `ses_load_${index}`;
        // FRESH directories the session never touched: after them, only the last MAX_TOUCHED remain.
        for (let f = 0; f < FRESH; f++) await plugin.touch(id, "read", { filePath: `fresh/s${index}/f${f}/x.ts` });
        const paths = sectionPaths(await plugin.step(id)).filter((path) => path !== "AGENTS.md").map(leaf);
        const expected = Array.from({ length: MAX_TOUCHED }, (_, k) => `fresh/s${index}/f${FRESH - MAX_TOUCHED + k}`);
        expect(paths).toEqual(expected);
      }),
    );
  }, 30_000);

  test("session.deleted frees the session: it starts again from nothing", async () => {
    for (let index = 0; index < SESSIONS; index++) {
      await plugin.hooks.event!({ event: { type: "session.deleted", properties: { info: { id: `ses_load_${index}` } } } as never });
    }
    for (let index = 0; index < SESSIONS; index++) {
      expect(sectionPaths(await plugin.step(`ses_load_${index}`))).toEqual(["AGENTS.md"]);
    }
  }, 30_000);
});

describe("memory of touched sets", () => {
  test("session.deleted releases what a session's touches held", async () => {
    const plugin = await start(root);
    try {
      const base = heap();
      const sessions = 100;
      const perSession = 2000;
      for (let s = 0; s < sessions; s++) {
        const paths = Array.from({ length: perSession }, (_, k) => `planned/s${s}/module-${k}/component-${k}/file.ts`);
        // 64 paths per call: the most a call may name.
        for (let k = 0; k < paths.length; k += 64) await plugin.touch(`ses_mem_${s}`, "read", { filePath: paths.slice(k, k + 64) , files: paths.slice(k, k + 64) });
      }
      const full = heap();
      for (let s = 0; s < sessions; s++) {
        await plugin.hooks.event!({ event: { type: "session.deleted", properties: { info: { id: `ses_mem_${s}` } } } as never });
      }
      const freed = heap();
      figures.record("sessionDeleted", { sessions, touchedPerSession: perSession, heldBytes: full - base, leftAfterDeleteBytes: freed - base });
      // The touches cost real memory, and deleting the sessions gives (nearly) all of it back.
      expect(full - base).toBeGreaterThan(8 * MB);
      expect(freed - base).toBeLessThan((full - base) / 10);
    } finally {
      await plugin.dispose();
    }
  }, 30_000);
});
