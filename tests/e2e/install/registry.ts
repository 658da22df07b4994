// A throwaway npm registry for the install tests: verdaccio on 127.0.0.1, with its storage, config
// and everything npm writes kept under one temp directory the caller removes.

import { spawn, type ChildProcess } from "node:child_process";
import { createHash } from "node:crypto";
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { freeLocalPort } from "../harness.ts";
import { npm, npmEnv, REPO_ROOT } from "./npm.ts";

const START_TIMEOUT_MS = 30_000;

export type Registry = {
  /** e.g. http://127.0.0.1:PORT/ */
  url: string;
  /** `npm publish <tarball>`, as a maintainer would publish the packed package. */
  publish(tarball: string): Promise<void>;
  /** Publishes packages packed by `packInstalled`, so that installs resolve dependencies offline. */
  publishPacked(tarballs: Packed[]): Promise<void>;
  stop(): Promise<void>;
};

export type Packed = { manifest: Record<string, unknown>; tarball: string };

/**
 * Tarballs of installed packages (a folder in node_modules each): what the folder holds, less its
 * own node_modules, under `package/`, as npm packs it. tar with fast gzip rather than `npm pack`:
 * gpt-tokenizer alone is ~30 MB, which npm takes ~10 s to pack.
 */
export async function packInstalled(folders: string[], destination: string): Promise<Packed[]> {
  mkdirSync(destination, { recursive: true });
  return Promise.all(
    folders.map(async (folder, index) => {
      const manifest = JSON.parse(readFileSync(join(folder, "package.json"), "utf8")) as Record<string, unknown>;
      const tarball = join(destination, `${index}.tgz`);
      const args = ["-czf", tarball, "--exclude=./node_modules", "--transform=s,^\\.,package,", "-C", folder, "."];
      const child = spawn("tar", args, { env: { PATH: process.env["PATH"] ?? "/usr/bin:/bin", GZIP: "-1" }, stdio: ["ignore", "ignore", "pipe"] });
      let stderr = "";
      child.stderr?.on("data", (chunk: Buffer) => (stderr += chunk.toString()));
      const code = await new Promise<number | null>((resolvePromise) => child.once("close", resolvePromise));
      if (code !== 0) throw new Error(`tar ${folder} failed (${code}): ${stderr}`);
      return { manifest, tarball };
    }),
  );
}

export async function startRegistry(dir: string): Promise<Registry> {
  mkdirSync(join(dir, "storage"), { recursive: true });
  const port = freeLocalPort();
  const url = `http://127.0.0.1:${port}/`;
  const config = join(dir, "config.yaml");
  writeFileSync(
    config,
    [
      `storage: ${JSON.stringify(join(dir, "storage"))}`,
      "auth:",
      "  htpasswd:",
      `    file: ${JSON.stringify(join(dir, "htpasswd"))}`,
      "    max_users: 10",
      // No uplinks: nothing is fetched from the outside, every package comes from this test.
      "uplinks: {}",
      "packages:",
      "  '**':",
      "    access: $all",
      "    publish: $all",
      // gpt-tokenizer alone is ~30 MB unpacked.
      "max_body_size: 200mb",
      "web:",
      "  enable: false",
      "log: { type: stdout, format: pretty, level: warn }",
      "",
    ].join("\n"),
  );
  const child = spawn(nodeBinary(), [join(REPO_ROOT, "node_modules/verdaccio/bin/verdaccio"), "--config", config, "--listen", `127.0.0.1:${port}`], {
    cwd: dir,
    env: { PATH: process.env["PATH"] ?? "/usr/bin:/bin", HOME: dir, TMPDIR: dir },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let output = "";
  child.stdout?.on("data", (chunk: Buffer) => (output += chunk.toString()));
  child.stderr?.on("data", (chunk: Buffer) => (output += chunk.toString()));
  const stop = () => stopChild(child);
  try {
    await waitUntilUp(url, child, () => output);
  } catch (error) {
    await stop();
    throw error;
  }
  // A user, for the token `npm publish` insists on.
  const user = await fetch(`${url}-/user/org.couchdb.user:e2e`, {
    method: "PUT",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ name: "e2e", password: "e2e-password" }),
  });
  const { token } = (await user.json()) as { token?: string };
  if (!user.ok || token === undefined) {
    await stop();
    throw new Error(`verdaccio: could not add a user (${user.status})`);
  }
  const hostKey = url.replace(/^http:/, "");
  const npmHome = join(dir, "npm-home");
  mkdirSync(npmHome, { recursive: true });

  return {
    url,
    async publish(tarball) {
      await npm(["publish", tarball, "--registry", url, `--${hostKey}:_authToken=${token}`], { cwd: dir, env: npmEnv(npmHome) });
    },
    async publishPacked(tarballs) {
      // The request `npm publish` makes, one per package, all at once, with "latest" set whatever
      // the package's publishConfig says.
      await Promise.all(
        tarballs.map(async ({ manifest, tarball }) => {
          const { name, version } = manifest as { name: string; version: string };
          const data = readFileSync(tarball);
          const body = {
            _id: name,
            name,
            "dist-tags": { latest: version },
            versions: {
              [version]: {
                ...manifest,
                _id: `${name}@${version}`,
                dist: {
                  shasum: createHash("sha1").update(data).digest("hex"),
                  integrity: `sha512-${createHash("sha512").update(data).digest("base64")}`,
                  tarball: `${url}${name}/-/${name.split("/").pop()}-${version}.tgz`,
                },
              },
            },
            _attachments: { [`${name}-${version}.tgz`]: { content_type: "application/octet-stream", data: data.toString("base64"), length: data.length } },
          };
          const response = await fetch(`${url}${name.replace("/", "%2f")}`, {
            method: "PUT",
            headers: { "content-type": "application/json", authorization: `Bearer ${token}` },
            body: JSON.stringify(body),
          });
          if (!response.ok) throw new Error(`verdaccio: publishing ${name}@${version} failed: ${response.status} ${await response.text()}`);
        }),
      );
    },
    stop,
  };
}

/** The Node binary (the tests run under Bun; verdaccio and the CLI check want Node). */
export function nodeBinary(): string {
  const node = Bun.which("node");
  if (node === null) throw new Error("no node on PATH");
  return node;
}

async function waitUntilUp(url: string, child: ChildProcess, output: () => string) {
  const deadline = Date.now() + START_TIMEOUT_MS;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`verdaccio exited with ${child.exitCode}:\n${output()}`);
    const up = await fetch(`${url}-/ping`).then((response) => response.ok, () => false);
    if (up) return;
    if (Date.now() > deadline) throw new Error(`verdaccio did not answer within ${START_TIMEOUT_MS} ms:\n${output()}`);
    await Bun.sleep(50);
  }
}

function stopChild(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise((resolvePromise) => {
    child.once("exit", () => resolvePromise());
    child.kill("SIGKILL");
  });
}

