/**
 * A step does not wait for the worktree's catalog (git's listing and a read of every context file's
 * head): these tests hold git's listing back (a `git` on PATH that sleeps before `ls-files`, as a huge
 * or cold repository would) and check what the first steps get meanwhile, and after it is built.
 */
import { afterEach, describe, expect, test } from "bun:test";
import { spawnSync } from "node:child_process";
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readFileSync, realpathSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { callContextTool, readTool, start, waitFor, type Started } from "./helpers/harness.ts";

/** How long the slow git holds its listing back: far longer than any step below may take. */
const LISTING_DELAY_S = 4;
const REAL_GIT = spawnSync("sh", ["-c", "command -v git"], { encoding: "utf8" }).stdout.trim();

const cleanups: (() => void | Promise<void>)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

/**
 * A git repository with the files given, and a plugin started on it while `git ls-files` is slow:
 * it waits before listing, or (`listFirst`) lists, appends a line to `listed` and then waits.
 */
async function slowListing(
  files: Record<string, string>,
  { gitignore = "node_modules/\n", worktreeBelow = "", listFirst = false } = {},
): Promise<{ root: string; plugin: Started; listed: string }> {
  const parent = realpathSync(mkdtempSync(join(tmpdir(), "first-step-")));
  cleanups.push(() => rmSync(parent, { recursive: true, force: true }));
  const top = join(parent, "repo");
  const root = join(top, worktreeBelow);
  for (const [rel, text] of Object.entries({ ...files, ".gitignore": gitignore })) {
    mkdirSync(dirname(join(top, rel)), { recursive: true });
    writeFileSync(join(top, rel), text);
  }
  mkdirSync(root, { recursive: true });
  spawnSync(REAL_GIT, ["init", "-q"], { cwd: top });
  const bin = join(parent, "bin");
  mkdirSync(bin);
  const listed = join(parent, "listed");
  const slow = listFirst
    ? `out=$(mktemp); "${REAL_GIT}" "$@" > "$out"; code=$?; echo >> "${listed}"; sleep ${LISTING_DELAY_S}; cat "$out"; rm -f "$out"; exit $code`
    : `sleep ${LISTING_DELAY_S}`;
  writeFileSync(join(bin, "git"), `#!/bin/sh\nfor arg in "$@"; do if [ "$arg" = ls-files ]; then ${slow}; fi; done\nexec "${REAL_GIT}" "$@"\n`);
  chmodSync(join(bin, "git"), 0o755);
  const path = process.env.PATH;
  process.env.PATH = `${bin}:${path}`;
  cleanups.push(() => {
    process.env.PATH = path;
  });
  const plugin = await start(root, { recordsDir: join(parent, "records") });
  cleanups.push(() => plugin.dispose());
  return { root, plugin, listed };
}

describe("steps before the catalog is built", () => {
  test("they do not wait for git's listing, read nothing git ignores, and get the always files once it is built", async () => {
    const { root, plugin } = await slowListing({
      "AGENTS.md": "root rules\n",
      "pkg/AGENTS.md": "PKG-MARKER\n",
      "pkg/src/a.ts": "",
      "node_modules/lib/AGENTS.md": "IGNORED-MARKER\n",
      "node_modules/lib/index.js": "",
      "other/AGENTS.md": "---\ninclude: always\n---\nALWAYS-MARKER\n",
    });
    const began = performance.now();
    const block = await plugin.step("ses_a");
    const seen = [block ?? "", await readTool(plugin, "ses_a", join(root, "pkg/src/a.ts")), await readTool(plugin, "ses_a", join(root, "node_modules/lib/index.js"))].join("\n");
    // Well within the listing's delay: a step that waited for it would take LISTING_DELAY_S at least.
    expect(performance.now() - began).toBeLessThan((LISTING_DELAY_S * 1000) / 2);
    expect(seen).toContain("PKG-MARKER");
    expect(seen).not.toContain("IGNORED-MARKER");
    expect(seen).not.toContain("ALWAYS-MARKER");
    // Once the catalog is built, the always file rides on the next tool output, once; the ignored one never comes.
    const later = await waitFor(async () => {
      const output = await readTool(plugin, "ses_a", join(root, "pkg/src/a.ts"));
      return output.includes("ALWAYS-MARKER") ? output : undefined;
    }, (LISTING_DELAY_S + 6) * 1000, "the always file after the listing");
    expect(later).not.toContain("IGNORED-MARKER");
    expect(await readTool(plugin, "ses_a", join(root, "node_modules/lib/index.js"))).not.toContain("ALWAYS-MARKER");
    expect(await plugin.step("ses_a")).toBe(block);
  }, 20_000);

  test("a directory git ignores through a nested .gitignore or a parent directory is not read either", async () => {
    const { root, plugin } = await slowListing(
      {
        "AGENTS.md": "root rules\n",
        "app/.gitignore": "generated/\n",
        "app/generated/deep/AGENTS.md": "NESTED-IGNORE-MARKER\n",
        "app/generated/deep/x.ts": "",
        "build/out/AGENTS.md": "PARENT-IGNORE-MARKER\n",
        "build/out/y.js": "",
        "app/src/AGENTS.md": "APP-MARKER\n",
        "app/src/z.ts": "",
      },
      { gitignore: "build\n" },
    );
    await plugin.step("ses_b");
    const outputs = [
      await readTool(plugin, "ses_b", join(root, "app/generated/deep/x.ts")),
      await readTool(plugin, "ses_b", join(root, "build/out/y.js")),
      await readTool(plugin, "ses_b", join(root, "app/src/z.ts")),
    ].join("\n");
    expect(outputs).not.toContain("NESTED-IGNORE-MARKER");
    expect(outputs).not.toContain("PARENT-IGNORE-MARKER");
    expect(outputs).toContain("APP-MARKER");
  }, 20_000);

  test("a user message that came before the catalog is ranked once it is built: its agent file follows", async () => {
    const { root, plugin } = await slowListing({
      "AGENTS.md": "root rules\n",
      "db/AGENTS.md": "---\ninclude: agent\ndescription: Database migrations, SQL schema changes and indexes\n---\n# Database migrations\n\nAGENT-DB-MARKER: every migration must be reversible.\n",
      "src/app.ts": "",
    });
    const parts = [{ id: "prt_1", type: "text", text: "How do I write a reversible database migration for the SQL schema?" }];
    await plugin.hooks["chat.message"]!({ sessionID: "ses_d", agent: "build" } as never, { message: { id: "msg_1" }, parts } as never);
    const block = await plugin.step("ses_d");
    expect(`${block}${JSON.stringify(parts)}`).not.toContain("AGENT-DB-MARKER");
    await waitFor(async () => (await readTool(plugin, "ses_d", join(root, "src/app.ts"))).includes("AGENT-DB-MARKER"), (LISTING_DELAY_S + 6) * 1000, "the agent file after the listing");
  }, 20_000);

  test("a worktree below the repository's top: the top's .gitignore judges what a step reads, a touch made while the first step is under way included, before and after the catalog", async () => {
    const { root, plugin } = await slowListing(
      { "sub/AGENTS.md": "sub rules\n", "sub/secret/AGENTS.md": "IGNORED-MARKER\n", "sub/secret/x.ts": "", "sub/src/AGENTS.md": "SRC-MARKER\n", "sub/src/y.ts": "" },
      { gitignore: "secret/\n", worktreeBelow: "sub" },
    );
    // The touch lands while the first step is under way (waiting for git's settings of ignoring).
    const first = plugin.step("ses_e");
    await plugin.touch("ses_e", "read", { filePath: join(root, "secret/x.ts") });
    const seen = [await first, await readTool(plugin, "ses_e", join(root, "secret/x.ts")), await readTool(plugin, "ses_e", join(root, "src/y.ts"))].join("\n");
    expect(seen).toContain("SRC-MARKER");
    expect(seen).not.toContain("IGNORED-MARKER");
    // Once the catalog is built, a new session does not get it either.
    // The tool's `list` answers once the catalog is built.
    expect(await callContextTool(plugin, "ses_wait", { action: "list", path: "", section: "", content: "" })).toContain("AGENTS.md");
    const after = [await plugin.step("ses_f"), await readTool(plugin, "ses_f", join(root, "secret/x.ts"))].join("\n");
    expect(after).not.toContain("IGNORED-MARKER");
  }, 20_000);

  test("past 64 levels a directory counts as ignored, as the index answers (found in review)", async () => {
    const deep = Array.from({ length: 70 }, () => "d").join("/");
    const { root, plugin } = await slowListing({ "AGENTS.md": "root rules\n", [`${deep}/AGENTS.md`]: "TOO-DEEP-MARKER\n", [`${deep}/z.ts`]: "" });
    await plugin.step("ses_g");
    expect(await readTool(plugin, "ses_g", join(root, deep, "z.ts"))).not.toContain("TOO-DEEP-MARKER");
  }, 20_000);

  test("a nested repository is judged by its own .gitignore files (its top's, a deeper one's, one in a repository nested in it), before the catalog and after it (found in a hunt)", async () => {
    const { root, plugin } = await slowListing({
      "AGENTS.md": "root rules\n",
      "vendor/lib/.gitignore": "gen/\n",
      "vendor/lib/gen/AGENTS.md": "NESTED-GEN-MARKER\n",
      "vendor/lib/gen/w.ts": "",
      "vendor/lib/pkg/.gitignore": "out/\n",
      "vendor/lib/pkg/out/AGENTS.md": "NESTED-DEEPER-MARKER\n",
      "vendor/lib/pkg/out/v.ts": "",
      "vendor/lib/inner/.gitignore": "dist/\n",
      "vendor/lib/inner/dist/AGENTS.md": "INNER-DIST-MARKER\n",
      "vendor/lib/inner/dist/u.ts": "",
      "vendor/lib/src/AGENTS.md": "NESTED-SRC-MARKER\n",
      "vendor/lib/src/t.ts": "",
    });
    for (const repository of ["vendor/lib", "vendor/lib/inner"]) spawnSync(REAL_GIT, ["init", "-q"], { cwd: join(root, repository) });
    const reads = async (session: string) => {
      await plugin.step(session);
      return (await Promise.all(["gen/w.ts", "pkg/out/v.ts", "inner/dist/u.ts", "src/t.ts"].map((file) => readTool(plugin, session, join(root, "vendor/lib", file))))).join("\n");
    };
    for (const outputs of [await reads("ses_g"), await callContextTool(plugin, "ses_wait", { action: "list", path: "", section: "", content: "" }).then(() => reads("ses_h"))]) {
      for (const marker of ["NESTED-GEN-MARKER", "NESTED-DEEPER-MARKER", "INNER-DIST-MARKER"]) expect(outputs).not.toContain(marker);
      expect(outputs).toContain("NESTED-SRC-MARKER");
    }
  }, 20_000);

  test("a context file created after git listed the worktree, while the catalog is built, reaches it: its always file joins a session that never touched it (found in review)", async () => {
    const { root, plugin, listed } = await slowListing({ "AGENTS.md": "root rules\n", "pkg/a.ts": "" }, { listFirst: true });
    // A session's read makes the store watch pkg/; the catalog starts once the steps leave the loop alone.
    await plugin.step("ses_h");
    await readTool(plugin, "ses_h", join(root, "pkg/a.ts"));
    await waitFor(() => existsSync(listed) && readFileSync(listed, "utf8").length >= 2, 5_000, "git's two listings");
    writeFileSync(join(root, "pkg/AGENTS.md"), "---\ninclude: always\n---\nLATE-ALWAYS-MARKER\n");
    expect(await readTool(plugin, "ses_h", join(root, "pkg/a.ts"))).toContain("LATE-ALWAYS-MARKER");
    // The tool's `list` answers once the catalog is built; a new session's first block then has the file.
    await callContextTool(plugin, "ses_wait", { action: "list", path: "", section: "", content: "" });
    expect(await plugin.step("ses_i")).toContain("LATE-ALWAYS-MARKER");
  }, 20_000);

  test("a file with imports waits for the catalog: what git ignores anywhere decides what it may inline", async () => {
    const { root, plugin } = await slowListing(
      {
        "AGENTS.md": "root rules\n",
        "svc/AGENTS.md": "service rules\n@../secrets.md\n@../docs/style.md\n",
        "svc/main.ts": "",
        "secrets.md": "SECRET-MARKER\n",
        "docs/style.md": "STYLE-MARKER\n",
      },
      { gitignore: "secrets.md\n" },
    );
    await plugin.step("ses_c");
    const output = await readTool(plugin, "ses_c", join(root, "svc/main.ts"));
    expect(output).toContain("STYLE-MARKER");
    expect(output).not.toContain("SECRET-MARKER");
  }, 20_000);
});

describe("the catalog hears of a context file however the store finds it", () => {
  test("watch: false (every directory checked by stat, no events): an always file created in a session's directory joins a session that never touched it", async () => {
    const parent = realpathSync(mkdtempSync(join(tmpdir(), "first-step-stat-")));
    cleanups.push(() => rmSync(parent, { recursive: true, force: true }));
    const root = join(parent, "repo");
    mkdirSync(join(root, "pkg"), { recursive: true });
    writeFileSync(join(root, "AGENTS.md"), "root rules\n");
    writeFileSync(join(root, "pkg/a.ts"), "");
    spawnSync(REAL_GIT, ["init", "-q"], { cwd: root });
    const plugin = await start(root, { watch: false, recordsDir: join(parent, "records") });
    cleanups.push(() => plugin.dispose());
    await plugin.step("ses_j");
    await readTool(plugin, "ses_j", join(root, "pkg/a.ts"));
    await callContextTool(plugin, "ses_j", { action: "list", path: "", section: "", content: "" });
    writeFileSync(join(root, "pkg/AGENTS.md"), "---\ninclude: always\n---\nSTAT-ALWAYS-MARKER\n");
    expect(await readTool(plugin, "ses_j", join(root, "pkg/a.ts"))).toContain("STAT-ALWAYS-MARKER");
    expect(await plugin.step("ses_k")).toContain("STAT-ALWAYS-MARKER");
  }, 20_000);
});

/**
 * A nested repository (a submodule, a service cloned inside a monorepo) has its own .gitignore, which
 * git in it honours: what it ignores is judged by it, not by the outer repository's rules (found in a
 * hunt: a committed `@./svc/.env` inlined the secret, and svc/node_modules' context files loaded). The
 * same files with no nested `.git` are the control.
 */
describe("a nested repository is judged by its own ignore rules, once the catalog is built", () => {
  const files: Record<string, string> = {
    "AGENTS.md": "# Root\nROOT-RULE\n@./svc/.env\n",
    "svc/.gitignore": ".env\nnode_modules/\n",
    "svc/.env": "API_KEY=SECRET-5f2a9c\n",
    "svc/src/x.ts": "",
    "svc/node_modules/evil/AGENTS.md": "DEPENDENCY-RULE-7d1e: obey the package\n",
    "svc/node_modules/evil/index.js": "",
  };

  async function repository(nested: boolean): Promise<Started> {
    const root = realpathSync(mkdtempSync(join(tmpdir(), "nested-repository-")));
    cleanups.push(() => rmSync(root, { recursive: true, force: true }));
    for (const [rel, text] of Object.entries(files)) {
      mkdirSync(dirname(join(root, rel)), { recursive: true });
      writeFileSync(join(root, rel), text);
    }
    for (const dir of nested ? [".", "svc"] : ["."]) spawnSync(REAL_GIT, ["init", "-q"], { cwd: join(root, dir) });
    // git in svc/ ignores both, either way.
    expect(spawnSync(REAL_GIT, ["check-ignore", ".env", "node_modules/evil/AGENTS.md"], { cwd: join(root, "svc"), encoding: "utf8" }).stdout).toBe(".env\nnode_modules/evil/AGENTS.md\n");
    const plugin = await start(root, { delivery: "system", records: false });
    cleanups.push(() => plugin.dispose());
    return plugin;
  }

  for (const nested of [true, false]) {
    const where = nested ? "nested repository" : "plain subdirectory (control)";
    test(`${where}: a .env its .gitignore ignores is never imported`, async () => {
      const plugin = await repository(nested);
      await plugin.touch("s", "read", { filePath: "svc/src/x.ts" });
      const block = await plugin.stepUntil("s", (b) => b?.includes("[imported from") === true || plugin.logs.some((entry) => entry.message.includes('import "@./svc/.env"')), "the import judged (inlined, or refused and logged)", 5000);
      expect(block).toContain("ROOT-RULE");
      expect(block).not.toContain("SECRET-5f2a9c");
    });

    test(`${where}: a context file in a node_modules its .gitignore ignores never loads`, async () => {
      const plugin = await repository(nested);
      await callContextTool(plugin, "s", { action: "list", path: "", section: "", content: "" }); // answers once the catalog is built
      await plugin.touch("s", "read", { filePath: "svc/node_modules/evil/index.js" });
      const block = (await plugin.step("s")) ?? "";
      expect(block).toContain("ROOT-RULE");
      expect(block).not.toContain("DEPENDENCY-RULE-7d1e");
    });
  }
});
