import { describe, expect, test } from "bun:test";
import { readFileSync, statSync, writeFileSync } from "node:fs";
import { mkdir, rm, symlink, writeFile } from "node:fs/promises";
import { dirname, join } from "node:path";
import fc from "fast-check";
import { Engine } from "../plugin/engine.ts";
import { createLogger } from "../plugin/log.ts";
import { DEFAULT_OPTIONS } from "../plugin/options.ts";
import { inotifyWatches, projects, sectionPaths, start, tempProject, waitFor } from "./helpers/harness.ts";

const openProject = projects();
// The block as rebuilt every step (delivery "system"): what sessions, the host's files and the budget put in it.
const open = (options?: Record<string, unknown>, history: unknown[] = []) => openProject("monorepo", { delivery: "system", ...options }, { history });

/** OpenCode's system prompt with its own instruction entries: `Instructions from: <path>` and then the file's exact text. */
const hostHeader = (root: string, ...files: string[]) =>
  ["You are opencode, an interactive CLI tool.", ...files.map((file) => `Instructions from: ${join(root, file)}\n${readFileSync(join(root, file), "utf8")}`)].join("\n");

describe("sessions", () => {
  test("sessions never see each other's paths", async () => {
    const plugin = await open();
    await plugin.touch("web", "read", { filePath: "apps/web/src/App.tsx" });
    await plugin.touch("api", "grep", { pattern: "x", path: "services/api/src" });
    const web = await plugin.step("web");
    const api = await plugin.step("api");
    expect(sectionPaths(web)).toEqual(["AGENTS.md", "apps/web/AGENTS.md"]);
    expect(sectionPaths(api)).toEqual(["AGENTS.md", "services/api/AGENTS.md"]);
  });

  test("a session's touched directories are bounded: the oldest is forgotten first", async () => {
    const plugin = await open({ maxTouchedDirs: 2 });
    await plugin.touch("s", "read", { filePath: "apps/web/src/App.tsx" });
    await plugin.touch("s", "read", { filePath: "services/api/src/server.ts" });
    await plugin.touch("s", "read", { filePath: "tools/scripts/release.sh" });
    expect(sectionPaths(await plugin.step("s"))).toEqual(["AGENTS.md", "services/api/AGENTS.md", "tools/scripts/CLAUDE.md"]);
  });

  test("a file name that is not markdown: the store looks for its variants under the names the index lists (found in review)", async () => {
    const project = await tempProject();
    const plugin = await start(project.root, { fileNames: ["CONVENTIONS.txt"], delivery: "system" });
    try {
      await mkdir(join(project.root, "pkg"), { recursive: true });
      await writeFile(join(project.root, "CONVENTIONS.txt"), "# Root conventions\n");
      await writeFile(join(project.root, "pkg/CONVENTIONS.override.md"), "# Package override\n");
      await plugin.touch("s", "read", { filePath: "pkg/x.ts" });
      expect(sectionPaths(await plugin.step("s"))).toEqual(["CONVENTIONS.txt", "pkg/CONVENTIONS.override.md"]);
    } finally {
      await plugin.dispose();
      await project.cleanup();
    }
  });

  test("session.deleted frees the session: it starts over", async () => {
    const plugin = await open();
    await plugin.touch("s", "read", { filePath: "apps/web/src/App.tsx" });
    expect(await plugin.step("s")).toContain("Web app");
    await plugin.hooks.event!({ event: { type: "session.deleted", properties: { info: { id: "s" } } } as never });
    expect(await plugin.step("s")).not.toContain("Web app");
  });

  /** The kernel's inotify watches of this process on directories with one of `inodes`. */
  const watchesOn = (inodes: ReadonlySet<string>): number => inotifyWatches().inodes.filter((ino) => inodes.has(ino)).length;

  test.skipIf(process.platform !== "linux")("session.deleted of a session holding 4,000 directories gives the event loop back while their watches go (a 2,000-directory session held it 43-55 ms in one task)", async () => {
    const project = await tempProject();
    const leaves: string[] = [];
    for (let i = 0; i < 80; i++) for (let j = 0; j < 50; j++) leaves.push(join(project.root, `p${i}`, `q${j}`));
    await Promise.all(leaves.map((leaf) => mkdir(leaf, { recursive: true })));
    const inodes = new Set([project.root, ...leaves.map(dirname), ...leaves].map((dir) => statSync(dir).ino.toString(16)));
    const plugin = await start(project.root, { delivery: "system", records: false });
    try {
      for (const leaf of leaves) await plugin.touch("big", "glob", { path: leaf, pattern: "*" });
      await plugin.step("big");
      await waitFor(() => watchesOn(inodes) === inodes.size, 20_000, "every directory watched");
      let leftWhenTimerRan: number | undefined;
      setTimeout(() => (leftWhenTimerRan = watchesOn(inodes)), 0);
      const began = performance.now();
      await plugin.hooks.event!({ event: { type: "session.deleted", properties: { info: { id: "big" } } } as never });
      const hookMs = performance.now() - began;
      await waitFor(() => leftWhenTimerRan !== undefined, 3000, "the timer");
      // A timer queued before the event ran while watches were still being let go of: the loop turned.
      // (On a machine fast enough to let go of all 4,081 within the hook's one slice, there is no long task to break up.)
      expect(leftWhenTimerRan! > 0 || hookMs < 8).toBe(true);
      await waitFor(() => watchesOn(inodes) === 0, 20_000, "every watch gone");
    } finally {
      await plugin.dispose();
      await project.cleanup();
    }
  }, 60_000);

  test("a session met mid-way is rebuilt from its history through the client", async () => {
    const history = [
      { info: { role: "user" }, parts: [{ type: "text", text: "fix the charge" }] },
      {
        info: { role: "assistant" },
        parts: [
          { type: "tool", tool: "read", state: { status: "completed", input: { filePath: "services/api/plugins/payments/src/charge.ts" } } },
          { type: "tool", tool: "bash", state: { status: "completed", input: { command: "ls", workdir: "tools/scripts" } } },
          { type: "tool", tool: "weird", state: null },
          { type: "step-finish" },
        ],
      },
    ];
    const plugin = await open({}, history);
    expect(sectionPaths(await plugin.step("continued"))).toEqual([
      "AGENTS.md",
      "services/api/AGENTS.md",
      "services/api/plugins/payments/AGENTS.md",
      "tools/scripts/CLAUDE.md",
    ]);
  });
});

describe("what the host already injected", () => {
  test("a file the host put in the system prompt is not repeated", async () => {
    const plugin = await open();
    await plugin.touch("s", "read", { filePath: "apps/web/src/App.tsx" });
    const block = await plugin.step("s", hostHeader(plugin.root, "AGENTS.md"));
    expect(sectionPaths(block)).toEqual(["apps/web/AGENTS.md"]);
  });

  test("a host entry is a copy only when the file's exact text follows it (a nested file) or it is on OpenCode's own chain", async () => {
    const plugin = await open();
    await plugin.touch("s", "read", { filePath: "apps/web/src/App.tsx" });
    const quoted = `You are opencode.\nInstructions from: ${join(plugin.root, "apps/web/AGENTS.md")}\n(a quoted line, not the file)`;
    expect(sectionPaths(await plugin.step("s", quoted))).toEqual(["AGENTS.md", "apps/web/AGENTS.md"]);
  });

  test("a marker line quoted in the root AGENTS.md, naming the root's AGENTS.local.md, does not keep that file out (OpenCode never sends a local variant; found in review)", async () => {
    const files = { "AGENTS.md": "# Root\nBe kind.\n", "AGENTS.local.md": "# Mine\nMY PERSONAL RULE\n" };
    const plugin = await openProject(undefined, { delivery: "system" }, { files });
    const local = join(plugin.root, "AGENTS.local.md");
    await writeFile(join(plugin.root, "AGENTS.md"), `# Root\nOpenCode lists its files like this:\nInstructions from: ${local}\n`);
    // OpenCode copies the committed file, quoted marker and all, into its own prompt.
    const host = `You are opencode.\nInstructions from: ${join(plugin.root, "AGENTS.md")}\n${readFileSync(join(plugin.root, "AGENTS.md"), "utf8")}`;
    expect(await plugin.step("s", host)).toContain("MY PERSONAL RULE");
  });

  test("a marker line quoted in the root AGENTS.md, naming the session directory's CLAUDE.md, does not keep that file out (OpenCode sends only AGENTS.md files when the chain has one; found in review)", async () => {
    const files = { "AGENTS.md": "# Root\nBe kind.\n", "pkg/CLAUDE.md": "# Pkg\nPKG CLAUDE RULE\n" };
    const plugin = await openProject(undefined, { delivery: "system" }, { files, directory: (root) => join(root, "pkg") });
    await writeFile(join(plugin.root, "AGENTS.md"), `# Root\nOpenCode lists its files like this:\nInstructions from: ${join(plugin.root, "pkg/CLAUDE.md")}\n`);
    const host = `You are opencode.\nInstructions from: ${join(plugin.root, "AGENTS.md")}\n${readFileSync(join(plugin.root, "AGENTS.md"), "utf8")}`;
    expect(await plugin.step("s", host)).toContain("PKG CLAUDE RULE");
  });

  test("OpenCode's name is looked up the whole chain, past maxDepth: an AGENTS.md above the walk makes a quoted CLAUDE.md no copy (found in review)", async () => {
    const files = { "AGENTS.md": "# Root\nBe kind.\n", "a/pkg/CLAUDE.md": "# Pkg\nPKG CLAUDE RULE\n" };
    const plugin = await openProject(undefined, { delivery: "system", maxDepth: 1 }, { files, directory: (root) => join(root, "a/pkg") });
    await writeFile(join(plugin.root, "AGENTS.md"), `# Root\nOpenCode lists its files like this:\nInstructions from: ${join(plugin.root, "a/pkg/CLAUDE.md")}\n`);
    const host = `You are opencode.\nInstructions from: ${join(plugin.root, "AGENTS.md")}\n${readFileSync(join(plugin.root, "AGENTS.md"), "utf8")}`;
    expect(await plugin.step("s", host)).toContain("PKG CLAUDE RULE");
  });

  test("OpenCode's name follows its prompt, not the options: an AGENTS.md made on the chain when fileNames leaves it out (found in review)", async () => {
    const files = { "pkg/CLAUDE.md": "# Pkg\nPKG CLAUDE RULE\n" };
    const plugin = await openProject(undefined, { delivery: "system", fileNames: ["CLAUDE.md"] }, { files, directory: (root) => join(root, "pkg") });
    const first = `You are opencode.\nInstructions from: ${join(plugin.root, "pkg/CLAUDE.md")}\n${readFileSync(join(plugin.root, "pkg/CLAUDE.md"), "utf8")}`;
    expect((await plugin.step("s", first)) ?? "").not.toContain("PKG CLAUDE RULE");
    await writeFile(join(plugin.root, "AGENTS.md"), `# Root\nOpenCode lists its files like this:\nInstructions from: ${join(plugin.root, "pkg/CLAUDE.md")}\n`);
    const host = `You are opencode.\nInstructions from: ${join(plugin.root, "AGENTS.md")}\n${readFileSync(join(plugin.root, "AGENTS.md"), "utf8")}`;
    expect(await plugin.step("s", host)).toContain("PKG CLAUDE RULE");
  });

  test("OpenCode names its files through the worktree as given (here a symlink to it): still recognised as the host's", async () => {
    const project = await tempProject("monorepo");
    const linked = `${project.root}-link`;
    await symlink(project.root, linked);
    const plugin = await start(linked, { delivery: "system" }, { directory: linked, worktree: linked });
    try {
      await plugin.touch("s", "read", { filePath: "apps/web/src/App.tsx" });
      expect(sectionPaths(await plugin.step("s", hostHeader(linked, "AGENTS.md", "apps/web/AGENTS.md")))).toEqual([]);
      expect(sectionPaths(await plugin.step("s", hostHeader(linked, "AGENTS.md")))).toEqual(["apps/web/AGENTS.md"]);
    } finally {
      await plugin.dispose();
      await rm(linked);
      await project.cleanup();
    }
  });

  test("nothing is pushed when the host already has every file", async () => {
    const plugin = await open();
    await plugin.touch("s", "read", { filePath: "apps/web/src/App.tsx" });
    expect(await plugin.step("s", hostHeader(plugin.root, "AGENTS.md", "apps/web/AGENTS.md"))).toBeUndefined();
  });

  test("OpenCode's title generator and compaction agent get no block", async () => {
    const plugin = await open();
    await plugin.touch("s", "read", { filePath: "apps/web/src/App.tsx" });
    expect(await plugin.step("s", "You are a title generator. You output ONLY a thread title.")).toBeUndefined();
    expect(await plugin.step("s", "You are a context summarization agent.")).toBeUndefined();
    expect(await plugin.step("s")).toContain("Web app");
  });

  test("OpenCode's read reminder is left whole, and the block leaves that file out while the read output carries it", async () => {
    const plugin = await open();
    const args = { filePath: join(plugin.root, "apps/web/src/App.tsx") };
    await plugin.touch("s", "read", args);
    expect(await plugin.step("s")).toContain("# Web app (React + Vite)");
    const file = join(plugin.root, "apps/web/AGENTS.md");
    const read = `<file>\n00001| export function App() {}\n</file>\n\n<system-reminder>\nInstructions from: ${file}\n${readFileSync(file, "utf8")}\n</system-reminder>`;
    const output = { title: "App.tsx", metadata: { loaded: [file] }, output: read };
    await plugin.hooks["tool.execute.after"]!({ tool: "read", sessionID: "s", callID: "r", args }, output);
    expect(output.output).toBe(read);
    expect(sectionPaths(await plugin.step("s"))).toEqual(["AGENTS.md"]);
    // Pruned by OpenCode, the read output no longer carries it: the file is back in the block.
    const messages = [{ info: { id: "m", sessionID: "s", role: "assistant" }, parts: [{ type: "tool", callID: "r", tool: "read", state: { status: "completed", output: read, time: { start: 1, end: 2, compacted: 3 } } }] }];
    await plugin.hooks["experimental.chat.messages.transform"]!({} as never, { messages } as never);
    expect(sectionPaths(await plugin.step("s"))).toEqual(["AGENTS.md", "apps/web/AGENTS.md"]);
  });

  test("only a read's closing reminder is touched: other tools' output and a file's own text stay as written", async () => {
    const plugin = await open();
    await plugin.touch("s", "read", { filePath: "apps/web/src/App.tsx" });
    const file = join(plugin.root, "apps/web/AGENTS.md");
    const reminder = `<system-reminder>\nInstructions from: ${file}\n# Web app\n</system-reminder>`;
    const bash = { title: "", metadata: {}, output: `line before\n${reminder}\nline after` };
    await plugin.hooks["tool.execute.after"]!({ tool: "bash", sessionID: "s", callID: "b", args: {} }, bash);
    expect(bash.output).toBe(`line before\n${reminder}\nline after`);
    const read = { title: "", metadata: {}, output: `<content>\n1: ${reminder}\n2: more\n</content>` };
    await plugin.hooks["tool.execute.after"]!({ tool: "read", sessionID: "s", callID: "r", args: {} }, read);
    expect(read.output).toBe(`<content>\n1: ${reminder}\n2: more\n</content>`);
  });

  test("the read tool's copy stays when the block could only carry part of the file", async () => {
    const plugin = await open({ systemTokens: 120 });
    const args = { filePath: join(plugin.root, "apps/web/src/App.tsx") };
    await plugin.touch("s", "read", args);
    const file = join(plugin.root, "apps/web/AGENTS.md");
    const reminder = `<system-reminder>\nInstructions from: ${file}\n# Web app\n</system-reminder>`;
    const output = { title: "", metadata: {}, output: `text\n\n${reminder}` };
    await plugin.hooks["tool.execute.after"]!({ tool: "read", sessionID: "s", callID: "r", args }, output);
    expect(output.output).toContain(reminder);
  });
});

describe("bounds", () => {
  test("at most 256 sessions are kept: the least recently used is forgotten (and rebuilt from history)", async () => {
    const plugin = await open();
    await plugin.touch("first", "read", { filePath: "apps/web/src/App.tsx" });
    expect(await plugin.step("first")).toContain("Web app");
    for (let i = 0; i < 255; i++) await plugin.touch(`other-${i}`, "read", { filePath: "tools/scripts/release.sh" });
    // 256 sessions: all kept. Stepping "first" makes it the most recently used again.
    expect(await plugin.step("first")).toContain("Web app");
    for (let i = 255; i < 511; i++) await plugin.touch(`other-${i}`, "read", { filePath: "tools/scripts/release.sh" });
    // The fake client's history is empty, so a forgotten session comes back with nothing touched.
    expect(await plugin.step("first")).not.toContain("Web app");
  });
});

describe("watches", () => {
  test.if(process.platform === "linux")("a step that reaches a new chain holds its directories before it reads them: all watched when the step ends, none left to check", async () => {
    const project = await tempProject("monorepo");
    const engine = await Engine.create({ directory: project.root, worktree: project.root, options: DEFAULT_OPTIONS, log: createLogger(undefined), client: undefined });
    try {
      await engine.system("s", ["You are opencode"]);
      // A turn for start-up's own background work (the session directory's watches), then a step with none.
      await new Promise((resolve) => setImmediate(resolve));
      const before = engine.store.stats.watched;
      const args = { filePath: "services/api/plugins/payments/src/charge.ts" };
      engine.touch("s", "read", args);
      await engine.afterTool("s", "read", "c1", args, { output: "text", metadata: {} });
      // services, api, plugins, payments, src: each watched before its read, with no turn of the loop for the background.
      expect(engine.store.stats).toMatchObject({ watched: before + 5, dirty: 0 });
    } finally {
      await engine.dispose();
      await project.cleanup();
    }
  });
});

describe("holding before reading (found in review)", () => {
  test("a hierarchy worked out again after an edit holds only its directories once more, not each start's walk again", async () => {
    const project = await tempProject();
    const leaves: string[] = [];
    const files: Record<string, string> = { "AGENTS.md": "# root\n" };
    for (let a = 0; a < 10; a++) {
      files[`p${a}/AGENTS.md`] = "# p\n";
      for (let b = 0; b < 20; b++) {
        files[`p${a}/q${b}/r/s/x.ts`] = "";
        leaves.push(`p${a}/q${b}/r/s/x.ts`);
      }
    }
    for (const [path, text] of Object.entries(files)) {
      await mkdir(dirname(join(project.root, path)), { recursive: true });
      await writeFile(join(project.root, path), text);
    }
    const engine = await Engine.create({ directory: project.root, worktree: project.root, options: { ...DEFAULT_OPTIONS, records: false }, log: createLogger(undefined), client: undefined });
    const store = engine.store;
    try {
      for (const leaf of leaves) engine.touch("s", "read", { filePath: leaf });
      await engine.inspect("s");
      // Counts what retain is handed (the real retain runs).
      const retain = store.retain.bind(store);
      let visited = 0;
      store.retain = (owner, dirs) => {
        for (const _ of dirs) visited++;
        return retain(owner, dirs);
      };
      writeFileSync(join(project.root, "p3/AGENTS.md"), "# p edited\n");
      await engine.inspect("s");
      // The session's directories: the root, 10 p, and 200 each of q, r and s. The edit makes one or
      // two rounds of the hierarchy, one pass over them each (holding its 201 walks again made 1,612).
      const dirs = 1 + 10 + 3 * 200;
      expect(visited).toBeGreaterThanOrEqual(dirs);
      expect(visited).toBeLessThanOrEqual(2 * dirs);
    } finally {
      await engine.dispose();
      await project.cleanup();
    }
  });
});

describe("session.deleted while its step is still running (found in review)", () => {
  test("lets go of everything the session held: no watch or pinned record outlives it", async () => {
    const project = await tempProject("monorepo");
    const engine = await Engine.create({ directory: project.root, worktree: project.root, options: DEFAULT_OPTIONS, log: createLogger(undefined), client: undefined });
    try {
      for (let i = 0; i < 50; i++) {
        const id = `s${i}`;
        engine.touch(id, "read", { filePath: "apps/web/src/App.tsx" });
        const step = engine.system(id, ["You are opencode"]);
        engine.forget(id);
        await step;
      }
      expect(engine.sessions.size).toBe(0);
      expect(engine.store.stats.owners).toBe(0);
      // The releases run on in slices: every watch goes with them (owners are forgotten at once).
      await waitFor(() => engine.store.stats.watched === 0, 3000, "every watch let go");
    } finally {
      await engine.dispose();
      await project.cleanup();
    }
  });
});

describe("a hierarchy reused from step to step (found in review)", () => {
  // a/AGENTS.md waits for a touched file under zzz/, never touched here (a match would stay, by design,
  // after its touch is forgotten): it loads only as a pinned directory's parent (manual).
  const files: Record<string, string> = {
    "AGENTS.md": "# root\n",
    "a/AGENTS.md": '---\npaths: ["zzz/**"]\n---\n# a\n',
    "a/b/AGENTS.md": "# ab\n",
    "a/b/x.ts": "x\n",
    "a/c/AGENTS.md": "# ac\n",
    "README.md": "readme\n",
  };
  const paths = ["a/b/x.ts", "a/b/AGENTS.md", "a/b/y.ts", "a/c/z.ts", "README.md", "a/q.ts"];
  const pinSets = [[], ["a/b/AGENTS.md"], ["a/b"], ["a/b/AGENTS.md", "a/c"]];

  test("is the hierarchy a fresh start computes for the same touches and pins, with paths forgotten past maxTouchedDirs", async () => {
    const project = await tempProject();
    for (const [rel, text] of Object.entries(files)) {
      await mkdir(join(project.root, dirname(rel)), { recursive: true });
      await writeFile(join(project.root, rel), text);
    }
    const engineWith = async (pin: string[], maxTouchedDirs: number) => {
      const engine = await Engine.create({ directory: project.root, worktree: project.root, options: { ...DEFAULT_OPTIONS, pin, maxTouchedDirs, records: false }, log: createLogger(undefined), client: undefined });
      engine.startCatalog();
      return engine;
    };
    const view = async (engine: Engine, session: string) => {
      const { hierarchy } = await engine.inspect(session);
      return { files: hierarchy.files.map((file) => file.rel).sort(), excluded: [...hierarchy.excluded.keys()].sort(), manual: [...hierarchy.manual].sort() };
    };
    try {
      await fc.assert(
        fc.asyncProperty(fc.constantFrom(...pinSets), fc.integer({ min: 1, max: 3 }), fc.array(fc.constantFrom(...paths), { minLength: 1, maxLength: 8 }), async (pin, maxTouchedDirs, touches) => {
          const stepped = await engineWith(pin, maxTouchedDirs);
          const fresh = await engineWith(pin, maxTouchedDirs);
          try {
            // One engine looks after every touch (its hierarchy extended or reused), the other only at the end.
            for (const path of touches) {
              stepped.touch("s", "read", { filePath: path });
              fresh.touch("s", "read", { filePath: path });
              await stepped.inspect("s");
            }
            expect(await view(stepped, "s")).toEqual(await view(fresh, "s"));
          } finally {
            await Promise.all([stepped.dispose(), fresh.dispose()]);
          }
        }),
        { numRuns: 60 },
      );
    } finally {
      await project.cleanup();
    }
  });
});

describe("a pin made while a step's hierarchy is computed (found in review of 0b2f6d3)", () => {
  test("is in the next step: the memo's base is the pins and order the hierarchy was computed with", async () => {
    const project = await tempProject("monorepo");
    const engine = await Engine.create({ directory: project.root, worktree: project.root, options: { ...DEFAULT_OPTIONS, delivery: "system", records: false }, log: createLogger(undefined), client: undefined });
    const store = engine.store;
    const chainOf = store.chainOf.bind(store);
    try {
      await engine.system("s", ["You are opencode"]);
      await engine.inspect("s");
      // The new chain of the next step is held until the pin is made: hierarchyOf awaits it (a read, or its slices).
      let release!: () => void;
      const gate = new Promise<void>((resolve) => (release = resolve));
      let held = false;
      store.chainOf = (start) => {
        const chain = chainOf(start);
        if (held || !start.endsWith(join("apps", "web", "src"))) return chain;
        held = true;
        return gate.then(() => chain);
      };
      engine.touch("s", "read", { filePath: "apps/web/src/App.tsx" });
      const step = engine.system("s", ["You are opencode"]);
      await waitFor(() => held, 3000, "the step's hierarchy waiting for its new chain");
      expect(await engine.contextTool("s", { action: "load", path: "services/api", section: "", content: "" })).toContain("pinned");
      release();
      await step;
      store.chainOf = chainOf;
      expect(sectionPaths(await engine.system("s", ["You are opencode"]))).toContain("services/api/AGENTS.md");
    } finally {
      store.chainOf = chainOf;
      await engine.dispose();
      await project.cleanup();
    }
  });
});
