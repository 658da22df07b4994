#!/usr/bin/env node
/**
 * opencode-project-context <command> [options]
 *
 * The package's command. Built to dist/bin/cli.js, it runs on plain Node (20.19+) as well as on Bun.
 */
import { readFileSync } from "node:fs";
import { runExplain } from "./explain.ts";

const NAME = "opencode-project-context";

const USAGE = `usage: ${NAME} <command> [options]

commands:
  explain [dir] [--touch <path>]...   show the context files a session in dir gets, and the exact block
  explain --session <id>              show what each request of a session had, from the plugin's records
                                      (${NAME} explain --help lists the options of both)

options:
  -h, --help      this help
  -v, --version   the package version`;

/** The version in the package.json next to the sources (bin/) or to the build (dist/bin/). */
function version(): string {
  for (const path of ["../package.json", "../../package.json"]) {
    try {
      const pkg = JSON.parse(readFileSync(new URL(path, import.meta.url), "utf8")) as { name?: string; version?: string };
      if (pkg.name === NAME && typeof pkg.version === "string") return pkg.version;
    } catch {
      // not there: try the next place
    }
  }
  return "unknown";
}

/** Runs the command line (without node and the script); resolves to the exit code. */
export async function main(argv: string[]): Promise<number> {
  const [command, ...rest] = argv;
  switch (command) {
    case "explain":
      return runExplain(rest);
    case "-v":
    case "--version":
      console.log(version());
      return 0;
    case "-h":
    case "--help":
    case "help":
      console.log(USAGE);
      return 0;
    case undefined:
      console.error(USAGE);
      return 2;
    default:
      console.error(`${NAME}: unknown command: ${command}\n\n${USAGE}`);
      return 2;
  }
}

process.exitCode = await main(process.argv.slice(2)).catch((error: unknown) => {
  console.error(`${NAME}: ${error instanceof Error ? error.message : String(error)}`);
  return 1;
});
