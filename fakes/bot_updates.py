"""Builders of Telegram Update JSON, as the Bot API delivers it to getUpdates.

Invariant: update ids and message ids only grow, every built message is remembered by
(chat id, message id) so replies, callback queries and edits can refer to it, and a chat keeps
one chat object (type, title, forum flag) across the updates and the bot's replies.
"""

from __future__ import annotations

import itertools
import time
from typing import Any

JSON = dict[str, Any]


def utf16_len(text: str) -> int:
    return len(text.encode("utf-16-le", "surrogatepass")) // 2


class UpdateBuilder:
    """Mixed into the fake Bot API; usable alone to feed `Application.process_update`."""

    def __init__(self) -> None:
        self.messages: dict[tuple[Any, int], JSON] = {}
        self.chats: dict[Any, JSON] = {}
        self._update_ids = itertools.count(1)
        self._message_ids = itertools.count(1)
        self.checkout_ids: dict[str, int] = {}
        """Each pre-checkout query built: its id → the payer's user id."""
        self.charges: dict[str, int] = {}
        """Each successful payment built: its `telegram_payment_charge_id` → the payer."""

    def next_update_id(self) -> int:
        return next(self._update_ids)

    def next_message_id(self) -> int:
        return next(self._message_ids)

    def user(self, user_id: int, first_name: str = "Alice", language_code: str = "en") -> JSON:
        return {
            "id": user_id,
            "is_bot": False,
            "first_name": first_name,
            "language_code": language_code,
        }

    def chat(self, chat_id: Any, chat_type: str | None = None, *, forum: bool = False) -> JSON:
        """The chat object for `chat_id`: private for positive ids, else a group."""
        known = self.chats.get(chat_id)
        if known is not None and (chat_type is None or known["type"] == chat_type):
            if forum:
                known["is_forum"] = True
            return known
        kind = chat_type or ("private" if isinstance(chat_id, int) and chat_id > 0 else "group")
        chat: JSON = {"id": chat_id, "type": kind}
        if kind == "private":
            chat["first_name"] = "Alice"
        else:
            chat["title"] = "Test group"
        if forum:
            chat["is_forum"] = True
        self.chats[chat_id] = chat
        return chat

    def message(
        self,
        chat_id: Any,
        text: str | None,
        *,
        user_id: int,
        first_name: str = "Alice",
        language_code: str = "en",
        chat_type: str = "private",
        message_thread_id: int | None = None,
        is_topic_message: bool = False,
        reply_to_message: JSON | int | None = None,
        entities: list[JSON] | None = None,
        caption: str | None = None,
        photo: bool = False,
        sticker: bool = False,
        media: JSON | None = None,
    ) -> JSON:
        """A user's Message; a leading `/command` gets its `bot_command` entity.

        With `photo`, `sticker` or `media` (fields such as {"voice": {...}}, see
        `fakes.bot_files`) the message has no text, only `caption` (if given),
        and `entities` are the caption's. `reply_to_message` may be a message dict or
        the id of a remembered message.
        """
        msg: JSON = {
            "message_id": self.next_message_id(),
            "date": int(time.time()),
            "chat": self.chat(chat_id, chat_type, forum=is_topic_message),
            "from": self.user(user_id, first_name, language_code),
        }
        if message_thread_id is not None:
            msg["message_thread_id"] = message_thread_id
        if is_topic_message:
            msg["is_topic_message"] = True
        if isinstance(reply_to_message, int):
            reply_to_message = self.messages[(chat_id, reply_to_message)]
        if reply_to_message is not None:
            msg["reply_to_message"] = reply_to_message
        if photo:
            msg["photo"] = [{"file_id": "ph1", "file_unique_id": "u1", "width": 90, "height": 90}]
        if sticker:
            msg["sticker"] = {
                "file_id": "st1",
                "file_unique_id": "u2",
                "width": 512,
                "height": 512,
                "is_animated": False,
                "is_video": False,
                "type": "regular",
            }
        if media:
            msg.update(media)
        with_caption = photo or sticker or bool(media)
        body, key = (caption, "caption") if with_caption else (text, "text")
        if body is not None:
            msg[key] = body
            ents = list(entities or [])
            if body.startswith("/") and len(body) > 1:
                command = body.split(maxsplit=1)[0]
                ents.insert(0, {"type": "bot_command", "offset": 0, "length": utf16_len(command)})
            if ents:
                msg["entities" if key == "text" else "caption_entities"] = ents
        self.messages[(chat_id, msg["message_id"])] = msg
        return msg

    def text_message(self, chat_id: Any, text: str | None, **kwargs: Any) -> JSON:
        """An Update carrying a new message; keyword arguments as for `message`."""
        return {
            "update_id": self.next_update_id(),
            "message": self.message(chat_id, text, **kwargs),
        }

    def edited_message(self, chat_id: Any, message_id: int, text: str, **kwargs: Any) -> JSON:
        """An Update editing the earlier message `message_id` to `text`."""
        msg = self.message(chat_id, text, **kwargs)
        del self.messages[(chat_id, msg["message_id"])]
        msg.update(message_id=message_id, edit_date=int(time.time()))
        self.messages[(chat_id, message_id)] = msg
        return {"update_id": self.next_update_id(), "edited_message": msg}

    def callback_query(
        self, chat_id: Any, user_id: int, data: str, message_id: int, language_code: str = "en"
    ) -> JSON:
        """An Update for a press on an inline button under message `message_id`, by a
        user whose client is set to `language_code`."""
        message = self.messages.get((chat_id, message_id)) or {
            "message_id": message_id,
            "date": int(time.time()),
            "chat": self.chat(chat_id),
        }
        return {
            "update_id": self.next_update_id(),
            "callback_query": {
                "id": f"cq{self.next_message_id()}",
                "from": self.user(user_id, language_code=language_code),
                "chat_instance": f"ci{chat_id}",
                "data": data,
                "message": {k: v for k, v in message.items() if v is not None},
            },
        }

    def pre_checkout_query(
        self,
        user_id: int,
        payload: str,
        total_amount: int,
        *,
        currency: str = "XTR",
        language_code: str = "en",
    ) -> JSON:
        """An Update asking the bot to confirm a payment (answered with answerPreCheckoutQuery)."""
        query_id = f"pcq{self.next_message_id()}"
        self.checkout_ids[query_id] = user_id
        return {
            "update_id": self.next_update_id(),
            "pre_checkout_query": {
                "id": query_id,
                "from": self.user(user_id, language_code=language_code),
                "currency": currency,
                "total_amount": total_amount,
                "invoice_payload": payload,
            },
        }

    def successful_payment(
        self,
        user_id: int,
        payload: str,
        total_amount: int,
        *,
        charge_id: str | None = None,
        currency: str = "XTR",
        is_recurring: bool = False,
        is_first_recurring: bool = False,
        subscription_expiration_date: int | None = None,
        language_code: str = "en",
    ) -> JSON:
        """An Update with the service message of a completed payment in the payer's private
        chat; the charge is then known to refundStarPayment (an update delivered again is
        the same dict pushed twice)."""
        charge = charge_id or f"stxCharge{self.next_message_id()}"
        self.charges[charge] = user_id
        paid: JSON = {
            "currency": currency,
            "total_amount": total_amount,
            "invoice_payload": payload,
            "telegram_payment_charge_id": charge,
            "provider_payment_charge_id": "",
        }
        if subscription_expiration_date is not None:
            paid["subscription_expiration_date"] = subscription_expiration_date
        if is_recurring:
            paid["is_recurring"] = True
        if is_first_recurring:
            paid["is_first_recurring"] = True
        msg = self.message(user_id, None, user_id=user_id, language_code=language_code)
        msg["successful_payment"] = paid
        return {"update_id": self.next_update_id(), "message": msg}
