import type { FileHandle } from "node:fs/promises";
import { StringDecoder } from "node:string_decoder";
import type { ReadPage } from "../core/workspace-fs.js";

const CHUNK_BYTES = 64 * 1024;
export const MAX_LINE_CHARS = 2_000;
export const MAX_PAGE_CHARS = 256 * 1024;

/**
 * Reads lines `offset .. offset+limit-1` (1-based) of an open file in fixed memory: chunk by chunk,
 * never holding more than one capped line and the page, however large the file or its lines.
 */
export async function readLinePage(handle: FileHandle, offset: number, limit: number): Promise<ReadPage> {
  const decoder = new StringDecoder("utf8");
  const buffer = Buffer.alloc(CHUNK_BYTES);
  const lines: string[] = [];
  let pageChars = 0;
  let lineNumber = 1;
  let current = "";
  let currentCut = false;
  let more = false;
  const takeLine = (): boolean => {
    if (lineNumber >= offset) {
      if (lines.length >= limit || pageChars + current.length > MAX_PAGE_CHARS) return false;
      const line = currentCut ? `${current} … [line cut at ${MAX_LINE_CHARS} characters]` : current;
      lines.push(line);
      pageChars += line.length + 1;
    }
    lineNumber += 1;
    current = "";
    currentCut = false;
    return true;
  };
  reading: for (;;) {
    const { bytesRead } = await handle.read(buffer, 0, CHUNK_BYTES, null);
    const text = bytesRead === 0 ? decoder.end() : decoder.write(buffer.subarray(0, bytesRead));
    let start = 0;
    for (let newline = text.indexOf("\n"); newline !== -1; newline = text.indexOf("\n", start)) {
      append(text.slice(start, newline));
      start = newline + 1;
      if (!takeLine()) {
        more = true;
        break reading;
      }
    }
    append(text.slice(start));
    if (bytesRead === 0) break;
  }
  // The last line has no newline after it; an empty file or a final newline leaves nothing.
  if (!more && current !== "" && !takeLine()) more = true;
  return { text: lines.join("\n"), firstLine: offset, lineCount: lines.length, more };

  function append(piece: string): void {
    // Lines before the page are only counted; a line is never kept past its cap.
    if (lineNumber < offset || currentCut) return;
    const room = MAX_LINE_CHARS - current.length;
    if (piece.length > room) {
      current += piece.slice(0, room);
      currentCut = true;
    } else {
      current += piece;
    }
  }
}
