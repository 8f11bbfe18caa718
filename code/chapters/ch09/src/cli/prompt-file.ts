import { open } from "node:fs/promises";
import { ConfigurationError, decodeText } from "../config.js";

/** A task, not a data set: every request carries the prompt again, so a larger file is refused before any. */
export const PROMPT_FILE_LIMIT = 1024 * 1024;

/**
 * The task in `path` (`--prompt-file`), decoded as `.env` is: UTF-8 with or without a BOM, or UTF-16, and
 * refused whole when its bytes are neither. Reads at most one byte past the limit, whatever the file's size.
 */
export async function readPromptFile(path: string): Promise<string> {
  let bytes: Buffer;
  try {
    bytes = await readAtMost(path, PROMPT_FILE_LIMIT + 1);
  } catch (error) {
    throw new ConfigurationError(`cannot read the prompt file ${path}: ${(error as Error).message}`);
  }
  if (bytes.length > PROMPT_FILE_LIMIT) {
    throw new ConfigurationError(`the prompt file ${path} is larger than 1 MiB`, "a prompt file holds the task only");
  }
  const text = decodeText(bytes);
  if (text === undefined) {
    throw new ConfigurationError(
      `the prompt file ${path} is neither UTF-8 nor UTF-16 text`,
      "save it as UTF-8: in PowerShell, Set-Content task.txt -Encoding utf8 -Value ..., or in Notepad choose UTF-8",
    );
  }
  // An editor ends the file with a line break; the task is the text before it.
  const task = text.replace(/\r?\n$/, "");
  if (task.trim() === "") throw new ConfigurationError(`the prompt file ${path} is empty`);
  return task;
}

async function readAtMost(path: string, limit: number): Promise<Buffer> {
  const handle = await open(path, "r");
  try {
    const buffer = Buffer.alloc(limit);
    let filled = 0;
    while (filled < limit) {
      const { bytesRead } = await handle.read(buffer, filled, limit - filled, null);
      if (bytesRead === 0) break;
      filled += bytesRead;
    }
    return buffer.subarray(0, filled);
  } finally {
    await handle.close();
  }
}
