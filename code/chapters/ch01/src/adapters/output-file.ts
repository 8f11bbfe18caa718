import { createWriteStream, type WriteStream } from "node:fs";
import { dirname } from "node:path";
import type { SavedOutput } from "../core/command-runner.js";
import { makeRealFolders } from "./real-folders.js";

/**
 * The whole output of a long command, streamed to a file as it arrives, up to `maxBytes`.
 * `write` returns false when the disk is behind: the caller pauses the process's pipes until
 * `drained`, so memory stays bounded however fast the command prints. Saving is best effort:
 * a file that cannot be written is simply not reported.
 */
export class OutputFile {
  private readonly stream: WriteStream | undefined;
  private bytes = 0;
  private complete = true;
  private failed = false;

  constructor(
    private readonly path: string,
    private readonly maxBytes: number,
    insideFolder: string,
  ) {
    try {
      makeRealFolders(insideFolder, dirname(path));
      // `wx` never follows or reuses an existing file, link or not.
      this.stream = createWriteStream(path, { flags: "wx" });
      this.stream.on("error", () => (this.failed = true));
    } catch {
      this.failed = true;
    }
  }

  write(chunk: Buffer): boolean {
    if (this.stream === undefined || this.failed) return true;
    const room = this.maxBytes - this.bytes;
    if (room <= 0) {
      this.complete = false;
      return true;
    }
    const piece = chunk.length > room ? chunk.subarray(0, room) : chunk;
    if (piece.length < chunk.length) this.complete = false;
    this.bytes += piece.length;
    return this.stream.write(piece);
  }

  drained(listener: () => void): void {
    if (this.stream === undefined) listener();
    else this.stream.once("drain", listener);
  }

  async close(): Promise<SavedOutput | undefined> {
    const stream = this.stream;
    if (stream === undefined) return undefined;
    await new Promise<void>((resolve) => stream.end(resolve));
    return this.failed ? undefined : { path: this.path, bytes: this.bytes, complete: this.complete };
  }
}
