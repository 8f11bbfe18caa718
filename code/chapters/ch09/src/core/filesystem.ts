/**
 * Chapter 3's hard boundary for writes, asked before any rule or approver: `false` when the path is
 * outside (any path `safePath` refuses); a throw when it cannot tell, and the policy denies on either.
 */
export interface WorkspaceWriteBoundary {
  isPathWithinWorkspace(workspace: string, relativePath: string): Promise<boolean>;
}

/**
 * The file operations the four file tools need. Every method takes the workspace first and a
 * model-supplied workspace-relative path: the adapter keeps no current folder, so one instance
 * can serve any workspace and no hidden state decides where a path lands.
 */
export interface WorkspaceFileSystem extends WorkspaceWriteBoundary {
  /** The whole file as strict UTF-8 text, or its first `limit` lines and a line saying how many more. */
  readFile(workspace: string, relativePath: string, limit?: number): Promise<string>;
  /** Creates or overwrites the file, and missing parent folders inside the workspace; returns the UTF-8 bytes written. */
  writeFile(workspace: string, relativePath: string, content: string): Promise<number>;
  /** Replaces the first exact occurrence of `oldText`; throws `TextNotFoundError` and writes nothing without one. */
  editFile(workspace: string, relativePath: string, oldText: string, newText: string): Promise<void>;
  /** Workspace-relative paths with `/` separators, sorted. */
  globFiles(workspace: string, pattern: string): Promise<readonly string[]>;
}

/** How many matches `glob` shows; `globFiles` returns at most one more, which says that more exist. */
export const GLOB_RESULT_LIMIT = 1_000;

// Windows ignores spaces before a device name's extension: `NUL .txt` is the device too.
const WINDOWS_RESERVED = /^(con|prn|aux|nul|conin\$|conout\$|com[0-9¹²³]|lpt[0-9¹²³]) *(\.|$)/i;

/**
 * Whether one path component is a Windows device name (`nul`, `COM1`, `con.txt`), in any case and with or without
 * an extension: on Windows it names the device, never a file, so no name a path or a Skill uses may be one.
 */
export function isWindowsReservedComponent(component: string): boolean {
  return WINDOWS_RESERVED.test(component);
}

/** The path is not a workspace-relative path the workspace can hold: it escapes, or names no ordinary file. */
export class WorkspacePathError extends Error {
  override readonly name = "WorkspacePathError";
}

/** Nothing exists at the path. */
export class FileNotFoundError extends Error {
  override readonly name = "FileNotFoundError";
}

/** Something exists at the path, but not what the operation needs (a folder where a file was meant, …). */
export class InvalidFilePathError extends Error {
  override readonly name = "InvalidFilePathError";
}

/** The file's bytes are not UTF-8; nothing is decoded with U+FFFD in their place. */
export class InvalidUtf8Error extends Error {
  override readonly name = "InvalidUtf8Error";
}

/** The exact text to replace does not occur in the file. */
export class TextNotFoundError extends Error {
  override readonly name = "TextNotFoundError";
}

/** Any other failure the adapter knows and names; `detail` says what, for the model. */
export class FileSystemOperationError extends Error {
  override readonly name = "FileSystemOperationError";
  constructor(readonly detail: string) {
    super(detail);
  }
}
