// Loaded with --import: every file module the process loads is written to LOAD_RECORD, one URL a line, as it loads.
import { register } from "node:module";
import process from "node:process";

register("./load-recorder-hooks.mjs", { parentURL: import.meta.url, data: { out: process.env.LOAD_RECORD } });
