/**
 * Records every platform package that a dependency lists as optional in package-lock.json.
 *
 * The npm registry this project installs from lacks some platform builds (opencode-darwin-arm64,
 * …). `npm install` then leaves them out of the lock, and `npm ci` refuses a lock that misses an
 * optional dependency. Entries with their os/cpu/libc let `npm ci` skip them on other platforms.
 * Run after any change of dependencies: `bun scripts/lock-platforms.ts`.
 */
import { readFileSync, writeFileSync } from "node:fs";

type Entry = { version?: string; optionalDependencies?: Record<string, string>; [key: string]: unknown };

const path = new URL("../package-lock.json", import.meta.url);
const lock = JSON.parse(readFileSync(path, "utf8")) as { packages: Record<string, Entry> };
const added: string[] = [];
for (const entry of Object.values(lock.packages)) {
  for (const [name, version] of Object.entries(entry.optionalDependencies ?? {})) {
    const key = `node_modules/${name}`;
    if (key in lock.packages) continue;
    const os = /darwin/.test(name) ? "darwin" : /windows|win32/.test(name) ? "win32" : /freebsd/.test(name) ? "freebsd" : "linux";
    const cpu = /arm64|aarch64/.test(name) ? "arm64" : /-arm(-|$)/.test(name) ? "arm" : "x64";
    lock.packages[key] = {
      version: version.replace(/^[\^~]/, ""),
      dev: true,
      optional: true,
      os: [os],
      cpu: [cpu],
      ...(/musl/.test(name) ? { libc: ["musl"] } : {}),
    };
    added.push(name);
  }
}
writeFileSync(path, `${JSON.stringify(lock, null, 2)}\n`);
console.log(added.length === 0 ? "lock already complete" : `recorded ${added.length}: ${added.join(", ")}`);
