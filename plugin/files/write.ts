import { writeSync } from "node:fs";

/**
 * Every byte of `bytes` written to `fd`, or a throw: one write may take only part of them (a disk all
 * but full, a file size limit), and the next then says why. A caller that cannot leave part of its
 * text behind (a file renamed over the original, a line appended) undoes what was written.
 */
export function writeWhole(fd: number, bytes: Uint8Array): void {
  for (let written = 0; written < bytes.length; ) {
    const count = writeSync(fd, bytes, written, bytes.length - written);
    if (count <= 0) throw new Error(`could not write (${written} of ${bytes.length} bytes written)`);
    written += count;
  }
}
