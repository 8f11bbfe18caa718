/** Longer glob patterns are refused: matching time grows with the pattern, and no real one is this long. */
export const MAX_GLOB_PATTERN_CHARS = 1_000;

/** Why a model-supplied path was refused: it leaves the workspace, or it is not a usable name. */
export type WorkspacePathProblem = "escape" | "invalid";

export class WorkspacePathError extends Error {
  override readonly name = "WorkspacePathError";
  constructor(
    readonly problem: WorkspacePathProblem,
    message: string,
  ) {
    super(message);
  }
}

/** Nothing exists at the path. */
export class FileNotFoundError extends Error {
  override readonly name = "FileNotFoundError";
}

/** Something exists at the path, but it is not a regular file (a folder, a device, …). */
export class NotAFileError extends Error {
  override readonly name = "NotAFileError";
}

/** The file is larger than the operation is willing to load at once. */
export class FileTooLargeError extends Error {
  override readonly name = "FileTooLargeError";
}

export interface ReadPage {
  /** The lines asked for, joined with `\n`; an over-long line is cut and says so. */
  readonly text: string;
  /** 1-based number of the first line returned. */
  readonly firstLine: number;
  readonly lineCount: number;
  /** More lines follow the page. */
  readonly more: boolean;
}

export interface GlobResult {
  /** Workspace-relative paths with `/` separators, sorted. */
  readonly paths: readonly string[];
  /** More matches existed than `limit`. */
  readonly capped: boolean;
}

/**
 * The file operations the built-in tools need, on model-supplied workspace-relative paths.
 * Every method resolves its path with the workspace rules of SPEC §8 and throws the errors above.
 */
export interface WorkspaceFileSystem {
  readText(path: string, page: { offset: number; limit: number }): Promise<ReadPage>;
  /** Whole file as text, for edits; refuses files over `maxBytes`. */
  readWhole(path: string, maxBytes: number): Promise<string>;
  /** Creates or overwrites; creates missing parent folders inside the workspace. */
  writeText(path: string, content: string): Promise<{ readonly created: boolean }>;
  glob(pattern: string, limit: number): Promise<GlobResult>;
}
