/**
 * Builds the package into dist/: `bun scripts/build.ts` (`npm run build`, and `prepack`).
 *
 * - tsc (tsconfig.build.json) emits one ESM .js and one .d.ts per module of plugin/ and bin/, with
 *   relative `.ts` imports rewritten to `.js`, so dist/ loads in OpenCode (Bun) and in Node 20.19+.
 *   One file per module, no bundling: a module that loads a sibling at run time (a worker, a data
 *   file) finds it next to itself, as it does in the sources.
 * - Every other file under plugin/ and bin/ (JSON data, and anything else that is not TypeScript)
 *   is copied to the same place, so new files are picked up without a list.
 * - Then dist/ is checked: no `.ts` import left in the emitted JavaScript, the bin is executable.
 */
import { spawnSync } from "node:child_process";
import { chmodSync, copyFileSync, existsSync, mkdirSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { dirname, join, relative } from "node:path";

const ROOT = join(import.meta.dirname, "..");
const DIST = join(ROOT, "dist");
const SOURCES = ["plugin", "bin"];
const BIN = join(DIST, "bin", "cli.js");

/** Every file under `dir`, recursively, as absolute paths. */
function filesUnder(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return filesUnder(path);
    return entry.isFile() ? [path] : [];
  });
}

/** TypeScript that tsc compiles (it emits .js and .d.ts for these); a hand-written .d.ts is copied. */
const compiled = (path: string) => /\.(c|m)?tsx?$/.test(path) && !/\.d\.(c|m)?ts$/.test(path);
const isTest = (path: string) => /\.test\.(c|m)?tsx?$/.test(path);

rmSync(DIST, { recursive: true, force: true });

const tsc = spawnSync(process.execPath, [join(ROOT, "node_modules/typescript/bin/tsc"), "-p", join(ROOT, "tsconfig.build.json")], {
  cwd: ROOT,
  stdio: "inherit",
});
if (tsc.status !== 0) {
  console.error(`build: tsc failed (exit ${tsc.status ?? tsc.signal})`);
  process.exit(1);
}

let copied = 0;
for (const source of SOURCES) {
  for (const file of filesUnder(join(ROOT, source))) {
    if (compiled(file) || isTest(file)) continue;
    const target = join(DIST, relative(ROOT, file));
    mkdirSync(dirname(target), { recursive: true });
    copyFileSync(file, target);
    copied++;
  }
}

const problems: string[] = [];
const emitted = filesUnder(DIST);
for (const file of emitted.filter((path) => path.endsWith(".js"))) {
  const text = readFileSync(file, "utf8");
  // A static or literal dynamic import of a relative .ts path would fail on Node.
  for (const match of text.matchAll(/(?:from\s*|import\s*\(\s*)["'](\.{1,2}\/[^"']*\.ts)["']/g)) {
    problems.push(`${relative(ROOT, file)} imports ${match[1]}`);
  }
}
for (const source of SOURCES) {
  for (const file of filesUnder(join(ROOT, source)).filter((path) => compiled(path) && !isTest(path))) {
    const js = join(DIST, relative(ROOT, file)).replace(/\.(c|m)?tsx?$/, (ext) => ext.replace("ts", "js").replace("x", ""));
    if (!existsSync(js)) problems.push(`no ${relative(ROOT, js)} for ${relative(ROOT, file)}`);
  }
}
if (!existsSync(BIN)) problems.push(`no ${relative(ROOT, BIN)}`);
if (problems.length > 0) {
  console.error(`build: dist/ is not usable:\n  ${problems.join("\n  ")}`);
  process.exit(1);
}
chmodSync(BIN, 0o755);
// stderr: `npm pack --json` prints its report on stdout after prepack.
console.error(`build: dist/ holds ${emitted.length} files (${copied} copied as they are)`);
