// Messages, on Folio's JavaScript SDK. The whole app:
// - Connect: find the server from the entity, find the real messaging
//   app's conversation and message types, which the owner installs once by
//   their published ids (README.md), register with a key kept in this
//   browser, and go to the server's consent page.
// - Back from it: list the conversations and their messages, then follow
//   both live: what the other person writes on their server reaches this
//   one (docs/federation.md), and this page hears it from its own server.
// - Start a conversation with someone's entity, send messages (text, an
//   image, or both), edit and delete one's own, stop sharing a conversation
//   one started and share it again, delete it.
import { AppKey, Folio, FolioError, authorizationFrom, filter, newRecordId, recordLink, register, versionLink } from "folio-client";

const STATE_KEY = "folio-messages";
/** The real types' publisher and ids (../shared/real-types/README.md). */
const PUBLISHER = "types.baq.dev";
const TYPE_IDS = { conversation: "7583995c51cf44ad972fdc123105e1dc", message: "153b3cb3a2f0494e950599de1cc13ef3" };
/** An image's renditions, as the message type bounds them: longest side in pixels, most bytes. */
const RENDITIONS = { small: [160, 81_920], medium: [800, 614_400], large: [1600, 2_097_152] };
const ORIGINAL_MAX_BYTES = 12_582_912;
const $ = (id) => document.getElementById(id);

const state = {
  load: () => JSON.parse(localStorage.getItem(STATE_KEY) ?? "null"),
  save: (value) => localStorage.setItem(STATE_KEY, JSON.stringify(value)),
  clear: () => localStorage.removeItem(STATE_KEY),
};

function status(text) {
  $("status").textContent = text;
}

function fail(error) {
  const message = error instanceof FolioError ? `${error.message} (${error.code})` : String(error.message ?? error);
  $("error").textContent = message;
  $("error").hidden = false;
  status("");
}

/** Runs a user's action, showing what went wrong instead of throwing. */
const act = (action) => async (event) => {
  event?.preventDefault();
  $("error").hidden = true;
  try {
    await action(event);
  } catch (error) {
    fail(error);
  }
};

const keyFor = (entity) => AppKey.inBrowser(`messages:${entity}`);

/** Version links to the store's conversation and message types, installed by their published ids. */
async function typesOf(folio) {
  const types = {};
  for (const [name, id] of Object.entries(TYPE_IDS)) {
    try {
      types[name] = versionLink(await folio.records.get(id, { entity: PUBLISHER }));
    } catch (error) {
      if (!(error instanceof FolioError && error.status === 404)) throw error;
      throw new Error(`${folio.entity} has no ${name} type yet. Its owner installs it once: ` +
        `folio type add --user NAME --published ${PUBLISHER}/${id} ${name}.json`);
    }
  }
  return types;
}

async function connect(entity) {
  status(`Finding ${entity}…`);
  const types = await typesOf(await Folio.connect({ entity }));
  const both = [types.conversation, types.message];
  status("Registering…");
  const registered = await register({
    entity,
    key: await keyFor(entity),
    name: "Messages",
    description: "Your conversations with people on any Folio server, with images.",
    website: location.origin,
    redirect: `${location.origin}${location.pathname}{?authorization_id}`,
    scope: { read: both, write: both, subscribe: both },
  });
  state.save({ entity, appId: registered.appId, authorizationId: null });
  location.assign(registered.consentUrl);
}

let folio;
let types;
let me;
/** What the store holds, by `entity+id`; the conversation on screen; the message being edited. */
const conversations = new Map();
const messages = new Map();
let open = null;
let editing = null;
const keyOf = (record) => `${record.author.entity}+${record.id}`;

/** The other person of a conversation, or null when its author keeps it to themself. */
function otherOf(conversation) {
  if (conversation.author.entity !== me) return conversation.author.entity;
  const readers = Array.isArray(conversation.permissions.read) ? conversation.permissions.read : [];
  return readers.map((link) => link.entity).find((entity) => entity !== me) ?? null;
}

function messagesOf(conversation) {
  return [...messages.values()]
    .filter(({ content }) => content.conversation.entity === conversation.author.entity &&
      content.conversation.record_id === conversation.id)
    .sort((a, b) => a.created_at.localeCompare(b.created_at));
}

function render() {
  const list = $("conversation-list");
  list.replaceChildren();
  for (const conversation of conversations.values()) {
    const button = document.createElement("button");
    button.type = "button";
    button.textContent = otherOf(conversation) ?? "Not shared";
    if (keyOf(conversation) === open) button.setAttribute("aria-current", "true");
    button.addEventListener("click", () => {
      open = keyOf(conversation);
      status("");
      render();
    });
    const item = document.createElement("li");
    item.append(button);
    list.append(item);
  }
  if (conversations.size === 0) {
    const empty = document.createElement("li");
    empty.textContent = "No conversations yet.";
    list.append(empty);
  }
  renderConversation(conversations.get(open));
}

function renderConversation(conversation) {
  $("conversation").hidden = !conversation;
  if (!conversation) return;
  const other = otherOf(conversation);
  const mine = conversation.author.entity === me;
  $("conversation-title").textContent = other ? `With ${other}` : "Not shared";
  $("sharing").textContent = !mine ? `${other} started it; it is kept on your server too.`
    : other ? `Shared with ${other}.` : "Only you can read it, and your messages in it.";
  $("unshare").hidden = !(mine && other);
  $("unshare").textContent = `Stop sharing with ${other}`;
  $("share").hidden = !mine || Boolean(other);
  $("delete-conversation").hidden = !mine;
  const list = $("messages");
  list.replaceChildren(...messagesOf(conversation).map(messageItem));
  if (list.childElementCount === 0) {
    const empty = document.createElement("li");
    empty.textContent = "No messages yet.";
    list.append(empty);
  }
}

/** Bearer URLs for images, by version and blob: an <img> loads them without headers. */
const imageUrls = new Map();

function messageItem(record) {
  const item = $("message-template").content.firstElementChild.cloneNode(true);
  const mine = record.author.entity === me;
  item.dataset.id = record.id;
  item.classList.toggle("mine", mine);
  item.querySelector(".message-author").textContent = mine ? "You" : record.author.entity;
  if (editing?.key === keyOf(record)) {
    item.querySelector(".message-text").replaceWith(editing.form);
  } else {
    item.querySelector(".message-text").textContent = record.content.text ?? "";
  }
  const place = item.querySelector(".message-image");
  for (const image of record.content.images ?? []) place.append(imageOf(record, image));
  if (mine) {
    item.querySelector(".message-actions").hidden = false;
    item.querySelector(".edit").addEventListener("click", () => edit(record));
    item.querySelector(".delete").addEventListener("click", act(async () => {
      await folio.records.delete(record);
      messages.delete(keyOf(record));
      render();
    }));
  }
  return item;
}

function imageOf(record, image) {
  const img = document.createElement("img");
  img.alt = image.original.name;
  img.width = Math.min(image.original_width, RENDITIONS.medium[0]);
  img.height = Math.round(img.width * image.original_height / image.original_width);
  // Another server's message names blobs its author's server keeps: the
  // user's own server reads one from there the first time it is asked for
  // it. That fails while the author's server cannot be reached.
  img.addEventListener("error", () => {
    const missing = document.createElement("span");
    missing.className = "missing-image";
    missing.textContent = `Image ${image.original.name} could not be loaded from ${record.author.entity}'s server`;
    img.replaceWith(missing);
  });
  const cacheKey = `${record.version.hash}/${image.medium.hash}`;
  if (!imageUrls.has(cacheKey)) imageUrls.set(cacheKey, folio.blobs.bearerUrl(record, image.medium));
  imageUrls.get(cacheKey).then((url) => (img.src = url.href), fail);
  return img;
}

/** Turns a message's text into a form; saving writes a new version of the message as it was read. */
function edit(record) {
  const form = document.createElement("form");
  form.className = "edit-message";
  const text = Object.assign(document.createElement("textarea"), { value: record.content.text ?? "", maxLength: 4096, rows: 2 });
  text.setAttribute("aria-label", "Edit message");
  const save = Object.assign(document.createElement("button"), { type: "submit", textContent: "Save" });
  form.append(text, save);
  form.addEventListener("submit", act(async () => {
    const content = { ...record.content, text: text.value };
    if (!text.value) delete content.text;
    const updated = await folio.records.update(record, { content });
    editing = null;
    messages.set(keyOf(updated), updated);
    render();
  }));
  editing = { key: keyOf(record), form };
  render();
  text.focus();
}

/** Makes `conversation` readable by `reader` (or by its author alone: `me`), and each of my messages in it. */
async function shareWith(conversation, reader) {
  const read = [{ entity: me }, { entity: reader }];
  const updated = await folio.records.update(conversation, { content: conversation.content, permissions: { read, write: [] } });
  conversations.set(keyOf(updated), updated);
  for (const message of messagesOf(conversation).filter((m) => m.author.entity === me)) {
    messages.set(keyOf(message), await folio.records.update(message, { content: message.content, permissions: { read } }));
  }
  render();
}

async function startConversation(event) {
  const other = event.target.with.value.trim();
  const existing = [...conversations.values()].find((c) => otherOf(c) === other);
  const conversation = existing ?? await folio.records.create({
    type: types.conversation,
    permissions: { read: [{ entity: me }, { entity: other }], write: [] },
    content: {},
  });
  conversations.set(keyOf(conversation), conversation);
  open = keyOf(conversation);
  event.target.reset();
  render();
  $("text").focus();
}

/** A JPEG of `bitmap` whose longest side is at most `side` pixels, within `maxBytes`. */
async function jpeg(bitmap, side, maxBytes) {
  const scale = Math.min(1, side / Math.max(bitmap.width, bitmap.height));
  const canvas = new OffscreenCanvas(Math.max(1, Math.round(bitmap.width * scale)), Math.max(1, Math.round(bitmap.height * scale)));
  const context = canvas.getContext("2d");
  context.fillStyle = "#fff"; // JPEG has no transparency
  context.fillRect(0, 0, canvas.width, canvas.height);
  context.drawImage(bitmap, 0, 0, canvas.width, canvas.height);
  for (const quality of [0.85, 0.7, 0.5, 0.3]) {
    const blob = await canvas.convertToBlob({ type: "image/jpeg", quality });
    if (blob.size <= maxBytes) return blob;
  }
  throw new Error(`the image is too large even as a ${canvas.width}×${canvas.height} JPEG`);
}

/** An image of the message type: JPEG renditions of `file`, uploaded. */
async function uploadImage(file) {
  const bitmap = await createImageBitmap(file);
  const stem = file.name.replace(/\.[^.]*$/, "") || "image";
  const original = file.type === "image/jpeg" && file.size <= ORIGINAL_MAX_BYTES
    ? file : await jpeg(bitmap, Infinity, ORIGINAL_MAX_BYTES);
  const image = {
    original: await folio.blobs.upload(original, { type: "image/jpeg", name: `${stem}.jpg` }),
    original_width: bitmap.width,
    original_height: bitmap.height,
    original_size: original.size,
  };
  for (const [name, [side, maxBytes]] of Object.entries(RENDITIONS)) {
    image[name] = await folio.blobs.upload(await jpeg(bitmap, side, maxBytes), { type: "image/jpeg", name: `${stem}-${name}.jpg` });
  }
  return image;
}

async function sendMessage(event) {
  const form = event.target;
  const conversation = conversations.get(open);
  const content = { conversation: recordLink(conversation) };
  if (form.text.value) content.text = form.text.value;
  const file = form.image.files[0];
  if (file) {
    status(`Uploading ${file.name}…`);
    content.images = [await uploadImage(file)];
  }
  if (!content.text && !content.images) return;
  const read = [{ entity: me }, { entity: otherOf(conversation) ?? me }];
  const message = await folio.records.create({ type: types.message, permissions: { read }, content });
  messages.set(keyOf(message), message);
  form.reset();
  status("");
  render();
}

/** A record the live stream brought: a new version, or a deletion (here or everywhere). */
function received(record) {
  const held = record.type.record_id === TYPE_IDS.conversation ? conversations : messages;
  if (record.no_content) held.delete(keyOf(record));
  else held.set(keyOf(record), record);
  if (open && !conversations.has(open)) {
    open = null;
    status("That conversation was deleted, or is no longer shared with you.");
  }
  render();
}

async function start({ entity, appId, authorizationId }) {
  status(`Opening your messages on ${entity}…`);
  folio = await Folio.connect({ entity, app: { appId, authorizationId, key: await keyFor(entity) }, clientId: newRecordId() });
  me = folio.entity;
  types = await typesOf(folio);
  $("who").textContent = me;
  $("who").hidden = false;
  for await (const record of folio.records.list({ filter: filter.type(types.conversation) })) conversations.set(keyOf(record), record);
  for await (const record of folio.records.list({ filter: filter.type(types.message) })) messages.set(keyOf(record), record);
  render();
  $("app").hidden = false;
  status("");
  const live = folio.events.subscribe({
    filter: [filter.type(types.conversation), filter.type(types.message)],
    includeDeleted: true,
    onError: () => status("Reconnecting…"),
    onOpen: () => status(""),
  });
  for await (const record of live) received(record);
}

async function main() {
  $("connect").addEventListener("submit", (event) => {
    event.preventDefault();
    connect($("entity").value.trim()).catch(fail);
  });
  $("new-conversation").addEventListener("submit", act(startConversation));
  $("new-message").addEventListener("submit", act(sendMessage));
  $("unshare").addEventListener("click", act(() => shareWith(conversations.get(open), me)));
  $("share").addEventListener("submit", act(async (event) => {
    await shareWith(conversations.get(open), event.target.with.value.trim());
    event.target.reset();
  }));
  $("delete-conversation").addEventListener("click", act(async () => {
    await folio.records.delete(conversations.get(open));
    conversations.delete(open);
    open = null;
    render();
  }));
  $("disconnect").addEventListener("click", () => {
    state.clear();
    location.replace(location.pathname);
  });

  const saved = state.load();
  const params = new URLSearchParams(location.search);
  if (saved && (params.has("authorization_id") || params.has("error"))) {
    const returned = location.href;
    history.replaceState(null, "", location.pathname);
    try {
      saved.authorizationId = authorizationFrom(returned);
      state.save(saved);
    } catch (error) {
      state.clear();
      $("connect").hidden = false;
      if (error instanceof FolioError && error.code === "access_denied") {
        fail(new Error("Access denied: Messages was not allowed to keep your conversations."));
        return;
      }
      throw error;
    }
  }
  if (saved?.authorizationId) {
    await start(saved);
  } else {
    $("connect").hidden = false;
  }
}

main().catch(fail);
