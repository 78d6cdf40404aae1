"""UI strings in English and Russian, picked from the user's Telegram language.

Both tables must have the same keys and placeholders (a test checks it), so a
missing translation is caught before it reaches a user.
"""

from __future__ import annotations

from typing import Any

EN: dict[str, str] = {
    "start": (
        "Hi! I'm a consultant. Tell me what you need help with. I'll ask a few clarifying "
        "questions (up to {rounds} rounds), then give you one complete, structured answer.\n\n"
        "/rounds — how many rounds · /answer — final answer now · /reset — start over · "
        "/help — more"
    ),
    "help": (
        "How it works: you describe your question, I ask the few questions that matter most, "
        "and in the last round I give a complete answer to your original request.\n\n"
        "/rounds [N] — rounds per consultation (1–{limit}, now {rounds})\n"
        "/answer — get the final answer now\n"
        "/reset — end this consultation and start over\n"
        "/status — where the consultation stands\n"
        "/retry — answer your last message again after an error\n"
        "/role — choose the expert\n"
        "/model — choose the model\n"
        "/memory — what I remember about you; /memory off|on\n"
        "/usage — your tokens and cost today and this month\n"
        "/history — your recent consultations\n"
        "/export [N] — the latest consultation (or number N of /history) as DOCX and Markdown "
        "files\n"
        "/forget — delete everything I keep about you\n\n"
        "In groups, mention me (@{username}) or reply to my message; everyone can answer my "
        "questions."
    ),
    "privacy_note": (
        "Privacy mode is on, so in this group I only see commands, replies to my messages and "
        "messages that mention @{username}. To let me read every message, an admin can turn "
        "privacy mode off in @BotFather (Bot Settings → Group Privacy) and re-add me."
    ),
    "round_label": "Round {round} of {max_rounds}",
    "final_label": "Final answer",
    "complete": (
        "✅ Consultation complete. To ask about this answer, reply to it or press “Ask a "
        "follow-up”; any other message starts a new consultation."
    ),
    "complete_final": "✅ Consultation complete. Send a new message to start another one.",
    "follow_up_label": "Follow-up {number} of {limit}",
    "follow_ups_left": (
        "To ask more about it, reply to this answer ({left} follow-ups left); any other "
        "message starts a new consultation."
    ),
    "follow_ups_done": (
        "✅ That was this consultation's last follow-up. Send a new message to start another one."
    ),
    "follow_up_prompt": "Send your follow-up question as a reply to this message.",
    "follow_up_not_found": (
        "I can't find that consultation in this chat any more. Send a new message to start "
        "another one."
    ),
    "follow_up_not_complete": (
        "This consultation has no final answer yet: just send your message to continue it."
    ),
    "follow_up_expired": (
        "That consultation ended more than {minutes} min ago, so it takes no more follow-ups. "
        "Send a new message to start another one."
    ),
    "follow_up_limit_reached": (
        "That consultation has taken all its follow-ups. Send a new message to start another one."
    ),
    "follow_up_disabled": (
        "Follow-up questions are turned off. Send a new message to start a new consultation."
    ),
    "follow_up_reply_instead": "To ask about that answer, reply to it with your question.",
    "answer_button": "Give the final answer now",
    "send_answers_button": "Send answers",
    "follow_up_button": "Ask a follow-up",
    "export_button": "Document",
    "export_none": "There is nothing to export yet. Send your question to start a consultation.",
    "export_range": (
        "There is no consultation number {number}. Choose one from 1 to {count} (see /history)."
    ),
    "export_usage": (
        "Send /export for your latest consultation, or /export N with its number in /history."
    ),
    "export_gone": "This consultation is no longer kept.",
    "history_title": "Your recent consultations, newest first (times in UTC):",
    "history_item": "{number}. {date} · {status} · {done} of {rounds} rounds\n“{request}”",
    "history_empty": "You have no consultations yet. Send your question to start one.",
    "history_active": "in progress",
    "history_complete": "complete",
    "history_reset": "ended",
    "history_expired": "expired",
    "history_answer_button": "Answer {number}",
    "history_document_button": "Document {number}",
    "round_stale": "These questions were already answered.",
    "round_nothing_chosen": "Choose an option first, or type your answer.",
    "rounds_show": "Rounds per consultation: {rounds} (1–{limit}). Change it with /rounds N or:",
    "rounds_set": "Rounds per consultation: {rounds}.",
    "rounds_set_active": "This consultation has used {done} of {rounds}.",
    "rounds_next_final": "Your next message will get the final answer.",
    "rounds_invalid": (
        "“{value}” is not a valid number of rounds. Use a whole number from 1 to {limit}, "
        "e.g. /rounds 3. Nothing was changed."
    ),
    "reset_done": "Consultation ended. Your next message starts a new one.",
    "reset_none": "There is no active consultation. Send your question to start one.",
    "reset_stopped": "Stopped working on your previous message. Send your question again.",
    "status_idle": "No active consultation. Rounds: {rounds}. Expert: {role}. Model: {model}.",
    "status_active": (
        "Consultation in progress: {done} of {rounds} rounds answered. Expert: {role}. "
        "Model: {model}.\n"
        "Request: “{request}”"
    ),
    "status_open_turn": "Your last message is still waiting for an answer: send /retry.",
    "status_answering": (
        "I'm writing the answer to your last message now. /reset stops it and starts over."
    ),
    "answer_none": "There is nothing to answer yet: send your question first.",
    "retry_none": "Nothing to retry: no message is waiting for an answer.",
    "model_error": (
        "⚠️ The model is not answering right now ({reason}). Your message is saved and this "
        "round is not used up: send /retry, or simply write again."
    ),
    "reason_timeout": "it took too long",
    "reason_rate_limited": "too many requests",
    "reason_unavailable": "the service is unavailable",
    "reason_rejected": "the request was refused",
    "reason_format_refused": "the model refused the reply format",
    "model_images_rejected": (
        "The model cannot look at images. Describe the photo in words, or send the text in it."
    ),
    "model_context_too_long": (
        "⚠️ This conversation has grown too long for the model to read. Send /reset to start "
        "over, then ask more briefly."
    ),
    "model_misconfigured": (
        "⚠️ I can't use my model because of a configuration problem on my side. The operator "
        "has been told; your message is saved, please try again later."
    ),
    "rate_limited": "You're sending messages too fast. Please wait {seconds} s and try again.",
    "not_allowed": "Sorry, this bot is not available here.",
    "text_only": (
        "I can only read text. Please describe it in words (a caption on a photo works too)."
    ),
    "truncated": "Your message was too long, so I used its first {limit} characters.",
    "heard": "🎤 “{text}”",
    "document_cut": (
        "Your document is longer than I can read at once, so I used its first {limit} characters."
    ),
    "download_failed": (
        "I couldn't download your file from Telegram. Nothing was saved; please send it again."
    ),
    "file_too_large": "This file is too large: I can take files up to {limit}.",
    "megabytes": "{value} MB",
    "kilobytes": "{value} KB",
    "file_unsupported": (
        "I can't read this kind of file. Documents I can read: {supported}. You can also "
        "paste the text into a message."
    ),
    "file_voice_off": ("I can't listen to voice messages here. Please type your question instead."),
    "file_unreadable": (
        "I couldn't open this file: it looks damaged or password-protected. Please send "
        "another copy, or paste the text into a message."
    ),
    "file_no_text": (
        "I found no text to read in this file (a scanned document, or silence in a voice "
        "message). Please type your question, or send a file with text in it."
    ),
    "file_transcription_failed": (
        "I couldn't transcribe your voice message just now. Nothing was saved: please try "
        "again, or type it."
    ),
    "file_too_costly": (
        "This file takes too long or too much memory to read, so I stopped. Nothing was "
        "saved: please send a smaller or simpler copy, or paste the text into a message."
    ),
    "document_not_read_whole": (
        "Your document is too large to read whole, so I used only its beginning (at most "
        "{limit} characters)."
    ),
    "images_not_seen": (
        "(I couldn't see your photo: this model reads text only. Describe it in words if it "
        "matters.)"
    ),
    "expired": (
        "Your previous consultation expired after {minutes} min without messages, so this "
        "starts a new one."
    ),
    "incomplete": "(This reply may be incomplete: it was cut off before its end.)",
    "sources": "Sources",
    "unknown_command": "I don't know that command. See /help.",
    "empty": "Your message is empty. Please write your question in words.",
    "role_show": "Expert: {role}. Choose another one (applies to the next consultation):",
    "role_set": "Expert set to {role}. It applies to your next consultation (/reset to start now).",
    "role_unknown": "Unknown expert “{value}”. Available: {roles}.",
    "model_show": "Model: {model}. Choose another one (applies from the next answer):",
    "model_removed": "The model “{removed}” chosen here is no longer available: {model} is used.",
    "model_set": "Model set to {model}. It applies from the next answer.",
    "model_unknown": "Unknown model “{value}”. Available: {models}.",
    "model_stale": "The list of models has changed: send /model again.",
    "not_admin": "Only group admins or the member who started the consultation can do that.",
    "forget_confirm": (
        "This deletes everything I keep about you and this chat: your consultations with all "
        "their messages, your settings, what I remember about you (in every chat), and "
        "replies waiting to be delivered. It cannot be undone."
    ),
    "forget_confirm_group": (
        "This deletes everything I keep about this group: its consultations with all their "
        "messages, its settings and replies waiting to be delivered; and what I remember "
        "about you (in every chat). It cannot be undone."
    ),
    "forget_confirm_member": (
        "This deletes what I remember about you (in every chat). This group's consultations "
        "can be deleted only by its admins. It cannot be undone."
    ),
    "forget_button": "Delete everything",
    "forget_cancel": "Cancel",
    "forget_done": "🗑 Deleted. Nothing of it is kept or will reach the model again.",
    "forget_done_popup": "Deleted.",
    "forget_cancelled": "Nothing was deleted.",
    "forget_expired": "This confirmation has expired. Send /forget again.",
    "forget_not_yours": "Only the person who sent /forget can confirm it.",
    "forget_from_yourself": "Send /forget from your own account, not as the group.",
    "presses_limited": "Too many presses. Please wait {seconds} s.",
    "internal_error": "Something went wrong on my side. Your message is saved; please try again.",
    "store_unavailable": (
        "⚠️ My storage is temporarily unavailable. Please try again in a few minutes: "
        "send the same message again."
    ),
    "update_given_up": (
        "⚠️ I could not handle this message. Please send it again differently: shorter, "
        "as plain text, or as another file."
    ),
    "store_kept": (
        "⚠️ My storage is temporarily unavailable. Your message is kept: I will answer it "
        "when storage is back, no need to send it again."
    ),
    "store_unavailable_press": (
        "⚠️ My storage is temporarily unavailable. Please press again in a few minutes."
    ),
    "memory_list": (
        "What I remember about you (used in your next consultations{where}):\n\n{facts}\n\n"
        "Press a number to delete that fact. /memory off — stop remembering."
    ),
    "memory_in_group": " in this group",
    "memory_empty": (
        "I remember nothing about you{where} yet. After a consultation I note lasting facts "
        "you told me, so I ask less next time. /memory off — stop remembering."
    ),
    "memory_is_off": (
        "Memory is off: I neither use nor note facts about you. /memory on — turn it on."
    ),
    "memory_on_done": "Memory is on: after a consultation I note lasting facts you told me.",
    "memory_off_done": (
        "Memory is off: I will neither use nor note facts about you. Facts already kept stay "
        "until you delete them with /memory."
    ),
    "memory_usage": "/memory — what I remember · /memory off · /memory on",
    "memory_disabled": "Memory is switched off on this bot.",
    "memory_deleted": "Deleted.",
    "memory_not_found": "That fact is no longer there.",
    "memory_notice": (
        "🧠 I noted a few lasting facts you told me, to ask less next time. /memory shows "
        "them and deletes any; /memory off stops it."
    ),
    "usage_report": "Your model usage (UTC days):\nToday: {today}\nThis month: {month}",
    "usage_line": "{prompt} tokens in, {completion} out, {cost}",
    "usage_estimated": " (estimated)",
    "usage_unpriced": "; no price for model {models}",
    "usage_unknown": "I cannot tell who sent this, so I have no usage to show.",
}

RU: dict[str, str] = {
    "start": (
        "Здравствуйте! Я консультант. Расскажите, с чем нужна помощь. Я задам несколько "
        "уточняющих вопросов (до {rounds} раундов), а затем дам один полный структурированный "
        "ответ.\n\n"
        "/rounds — число раундов · /answer — итоговый ответ сейчас · /reset — начать заново · "
        "/help — подробнее"
    ),
    "help": (
        "Как это работает: вы описываете вопрос, я задаю самые важные уточняющие вопросы, а в "
        "последнем раунде даю полный ответ на ваш исходный запрос.\n\n"
        "/rounds [N] — раундов в консультации (1–{limit}, сейчас {rounds})\n"
        "/answer — получить итоговый ответ сейчас\n"
        "/reset — завершить консультацию и начать заново\n"
        "/status — на каком этапе консультация\n"
        "/retry — ответить на последнее сообщение ещё раз после ошибки\n"
        "/role — выбрать эксперта\n"
        "/model — выбрать модель\n"
        "/memory — что я помню о вас; /memory off|on\n"
        "/usage — ваши токены и стоимость за сегодня и за месяц\n"
        "/history — ваши последние консультации\n"
        "/export [N] — последняя консультация (или номер N из /history) файлами DOCX и "
        "Markdown\n"
        "/forget — удалить всё, что я храню о вас\n\n"
        "В группах упомяните меня (@{username}) или ответьте на моё сообщение; отвечать на мои "
        "вопросы может любой участник."
    ),
    "privacy_note": (
        "Включён режим приватности, поэтому в этой группе я вижу только команды, ответы на мои "
        "сообщения и сообщения с упоминанием @{username}. Чтобы я видел все сообщения, "
        "администратор может отключить его в @BotFather (Bot Settings → Group Privacy) и "
        "добавить меня заново."
    ),
    "round_label": "Раунд {round} из {max_rounds}",
    "final_label": "Итоговый ответ",
    "complete": (
        "✅ Консультация завершена. Чтобы спросить об этом ответе, ответьте на него или "
        "нажмите «Задать уточняющий вопрос»; любое другое сообщение начнёт новую консультацию."
    ),
    "complete_final": (
        "✅ Консультация завершена. Напишите новое сообщение, чтобы начать следующую."
    ),
    "follow_up_label": "Уточняющий вопрос {number} из {limit}",
    "follow_ups_left": (
        "Чтобы спросить ещё, ответьте на это сообщение (осталось вопросов: {left}); любое "
        "другое сообщение начнёт новую консультацию."
    ),
    "follow_ups_done": (
        "✅ Это был последний уточняющий вопрос к этой консультации. Напишите новое сообщение, "
        "чтобы начать следующую."
    ),
    "follow_up_prompt": "Напишите уточняющий вопрос ответом на это сообщение.",
    "follow_up_not_found": (
        "Я не нахожу эту консультацию в этом чате. Напишите новое сообщение, чтобы начать "
        "следующую."
    ),
    "follow_up_not_complete": (
        "У этой консультации ещё нет итогового ответа: просто напишите сообщение, чтобы "
        "продолжить её."
    ),
    "follow_up_expired": (
        "Эта консультация завершилась больше {minutes} мин назад, уточняющие вопросы к ней "
        "больше не принимаются. Напишите новое сообщение, чтобы начать следующую."
    ),
    "follow_up_limit_reached": (
        "К этой консультации заданы все уточняющие вопросы. Напишите новое сообщение, чтобы "
        "начать следующую."
    ),
    "follow_up_disabled": (
        "Уточняющие вопросы отключены. Напишите новое сообщение, чтобы начать новую консультацию."
    ),
    "follow_up_reply_instead": "Чтобы спросить об этом ответе, ответьте на него своим вопросом.",
    "answer_button": "Дать итоговый ответ сейчас",
    "send_answers_button": "Отправить ответы",
    "follow_up_button": "Задать уточняющий вопрос",
    "export_button": "Документ",
    "export_none": "Пока нечего выгружать. Отправьте свой вопрос, чтобы начать консультацию.",
    "export_range": (
        "Консультации с номером {number} нет. Выберите номер от 1 до {count} (см. /history)."
    ),
    "export_usage": (
        "Отправьте /export для последней консультации или /export N с её номером из /history."
    ),
    "export_gone": "Эта консультация больше не хранится.",
    "history_title": "Ваши последние консультации, сначала новые (время в UTC):",
    "history_item": "{number}. {date} · {status} · раундов: {done} из {rounds}\n«{request}»",
    "history_empty": "У вас пока нет консультаций. Отправьте свой вопрос, чтобы начать.",
    "history_active": "идёт",
    "history_complete": "завершена",
    "history_reset": "прервана",
    "history_expired": "истекла",
    "history_answer_button": "Ответ {number}",
    "history_document_button": "Документ {number}",
    "round_stale": "На эти вопросы уже ответили.",
    "round_nothing_chosen": "Сначала выберите вариант или напишите ответ.",
    "rounds_show": "Раундов в консультации: {rounds} (1–{limit}). Измените командой /rounds N или:",
    "rounds_set": "Раундов в консультации: {rounds}.",
    "rounds_set_active": "В этой консультации использовано {done} из {rounds}.",
    "rounds_next_final": "На следующее сообщение вы получите итоговый ответ.",
    "rounds_invalid": (
        "«{value}» — неверное число раундов. Укажите целое число от 1 до {limit}, например "
        "/rounds 3. Ничего не изменено."
    ),
    "reset_done": "Консультация завершена. Следующее сообщение начнёт новую.",
    "reset_none": "Активной консультации нет. Напишите вопрос, чтобы начать.",
    "reset_stopped": "Обработка предыдущего сообщения остановлена. Отправьте вопрос ещё раз.",
    "status_idle": (
        "Активной консультации нет. Раундов: {rounds}. Эксперт: {role}. Модель: {model}."
    ),
    "status_active": (
        "Идёт консультация: отвечено раундов {done} из {rounds}. Эксперт: {role}. "
        "Модель: {model}.\n"
        "Запрос: «{request}»"
    ),
    "status_open_turn": "Ваше последнее сообщение ещё ждёт ответа: отправьте /retry.",
    "status_answering": (
        "Сейчас пишу ответ на ваше последнее сообщение. /reset остановит его и начнёт заново."
    ),
    "answer_none": "Пока нечего отвечать: сначала напишите свой вопрос.",
    "retry_none": "Повторять нечего: нет сообщений, ожидающих ответа.",
    "model_error": (
        "⚠️ Модель сейчас не отвечает ({reason}). Ваше сообщение сохранено, и раунд не "
        "потрачен: отправьте /retry или просто напишите ещё раз."
    ),
    "reason_timeout": "слишком долгое ожидание",
    "reason_rate_limited": "слишком много запросов",
    "reason_unavailable": "сервис недоступен",
    "reason_rejected": "запрос отклонён",
    "reason_format_refused": "модель отклонила формат ответа",
    "model_images_rejected": (
        "Модель не умеет смотреть изображения. Опишите фото словами или пришлите текст с него."
    ),
    "model_context_too_long": (
        "⚠️ Разговор стал слишком длинным для модели. Отправьте /reset, чтобы начать заново, и "
        "сформулируйте вопрос короче."
    ),
    "model_misconfigured": (
        "⚠️ Не могу обратиться к модели из-за ошибки в моих настройках. Администратор уже "
        "уведомлён; ваше сообщение сохранено, попробуйте позже."
    ),
    "rate_limited": "Вы пишете слишком часто. Подождите {seconds} с и попробуйте снова.",
    "not_allowed": "Извините, этот бот здесь недоступен.",
    "text_only": (
        "Я понимаю только текст. Опишите, пожалуйста, словами (подпись к фото тоже подойдёт)."
    ),
    "truncated": "Сообщение слишком длинное, я использовал первые {limit} символов.",
    "heard": "🎤 «{text}»",
    "document_cut": (
        "Документ длиннее, чем я могу прочитать за раз, поэтому я использовал первые {limit} "
        "символов."
    ),
    "download_failed": (
        "Не удалось скачать ваш файл из Telegram. Ничего не сохранено; отправьте его ещё раз."
    ),
    "file_too_large": "Файл слишком большой: я принимаю файлы до {limit}.",
    "megabytes": "{value} МБ",
    "kilobytes": "{value} КБ",
    "file_unsupported": (
        "Такой файл я прочитать не могу. Я читаю документы: {supported}. Можно также "
        "вставить текст в сообщение."
    ),
    "file_voice_off": (
        "Здесь я не могу слушать голосовые сообщения. Пожалуйста, напишите вопрос текстом."
    ),
    "file_unreadable": (
        "Не удалось открыть файл: похоже, он повреждён или защищён паролем. Отправьте другую "
        "копию или вставьте текст в сообщение."
    ),
    "file_no_text": (
        "В этом файле нет текста, который я мог бы прочитать (скан документа или тишина в "
        "голосовом сообщении). Напишите вопрос текстом или пришлите файл с текстом."
    ),
    "file_transcription_failed": (
        "Не удалось распознать голосовое сообщение. Ничего не сохранено: попробуйте ещё раз "
        "или напишите текстом."
    ),
    "file_too_costly": (
        "Этот файл читается слишком долго или требует слишком много памяти, поэтому я "
        "остановился. Ничего не сохранено: пришлите файл поменьше или попроще либо вставьте "
        "текст в сообщение."
    ),
    "document_not_read_whole": (
        "Документ слишком большой, чтобы прочитать его целиком, поэтому я использовал только "
        "его начало (не больше {limit} символов)."
    ),
    "images_not_seen": (
        "(Я не смог увидеть ваше фото: эта модель читает только текст. Опишите его словами, "
        "если это важно.)"
    ),
    "expired": (
        "Предыдущая консультация истекла после {minutes} мин без сообщений, поэтому начинаем новую."
    ),
    "incomplete": "(Ответ может быть неполным: он оборвался, не дойдя до конца.)",
    "sources": "Источники",
    "unknown_command": "Такой команды я не знаю. Смотрите /help.",
    "empty": "Сообщение пустое. Пожалуйста, напишите вопрос словами.",
    "role_show": "Эксперт: {role}. Выберите другого (для следующей консультации):",
    "role_set": "Эксперт: {role}. Он начнёт со следующей консультации (/reset — начать сейчас).",
    "role_unknown": "Неизвестный эксперт «{value}». Доступны: {roles}.",
    "model_show": "Модель: {model}. Выберите другую (со следующего ответа):",
    "model_removed": "Выбранная здесь модель «{removed}» больше недоступна: используется {model}.",
    "model_set": "Модель: {model}. Она будет отвечать со следующего ответа.",
    "model_unknown": "Неизвестная модель «{value}». Доступны: {models}.",
    "model_stale": "Список моделей изменился: отправьте /model ещё раз.",
    "not_admin": (
        "Это могут делать только администраторы группы или участник, начавший консультацию."
    ),
    "forget_confirm": (
        "Будет удалено всё, что я храню о вас и этом чате: ваши консультации со всеми "
        "сообщениями, ваши настройки, то, что я помню о вас (во всех чатах), и ответы, "
        "ожидающие доставки. Отменить это нельзя."
    ),
    "forget_confirm_group": (
        "Будет удалено всё, что я храню об этой группе: её консультации со всеми сообщениями, "
        "её настройки и ответы, ожидающие доставки, а также то, что я помню о вас (во всех "
        "чатах). Отменить это нельзя."
    ),
    "forget_confirm_member": (
        "Будет удалено то, что я помню о вас (во всех чатах). Консультации этой группы могут "
        "удалить только её администраторы. Отменить это нельзя."
    ),
    "forget_button": "Удалить всё",
    "forget_cancel": "Отмена",
    "forget_done": "🗑 Удалено. Ничего из этого не хранится и больше не попадёт в модель.",
    "forget_done_popup": "Удалено.",
    "forget_cancelled": "Ничего не удалено.",
    "forget_expired": "Срок подтверждения истёк. Отправьте /forget ещё раз.",
    "forget_not_yours": "Подтвердить может только тот, кто отправил /forget.",
    "forget_from_yourself": "Отправьте /forget от своего имени, а не от имени группы.",
    "presses_limited": "Слишком много нажатий. Подождите {seconds} с.",
    "internal_error": (
        "Что-то пошло не так на моей стороне. Сообщение сохранено, попробуйте ещё раз."
    ),
    "store_unavailable": (
        "⚠️ Хранилище временно недоступно. Пожалуйста, попробуйте через несколько минут: "
        "отправьте то же сообщение ещё раз."
    ),
    "update_given_up": (
        "⚠️ Не удалось обработать это сообщение. Пожалуйста, отправьте его иначе: короче, "
        "обычным текстом или другим файлом."
    ),
    "store_kept": (
        "⚠️ Хранилище временно недоступно. Ваше сообщение сохранено: я отвечу на него, "
        "когда хранилище снова заработает, отправлять его ещё раз не нужно."
    ),
    "store_unavailable_press": (
        "⚠️ Хранилище временно недоступно. Пожалуйста, нажмите ещё раз через несколько минут."
    ),
    "memory_list": (
        "Что я о вас помню (учитываю в следующих консультациях{where}):\n\n{facts}\n\n"
        "Нажмите номер, чтобы удалить факт. /memory off — больше не запоминать."
    ),
    "memory_in_group": " в этой группе",
    "memory_empty": (
        "Пока я ничего о вас не помню{where}. После консультации я отмечаю долговременные "
        "факты, которые вы сообщили, чтобы в следующий раз спрашивать меньше. "
        "/memory off — не запоминать."
    ),
    "memory_is_off": (
        "Память выключена: я не использую и не запоминаю факты о вас. /memory on — включить."
    ),
    "memory_on_done": (
        "Память включена: после консультации я отмечаю долговременные факты, которые вы сообщили."
    ),
    "memory_off_done": (
        "Память выключена: я не буду использовать и запоминать факты о вас. Уже сохранённые "
        "остаются, пока вы не удалите их через /memory."
    ),
    "memory_usage": "/memory — что я помню · /memory off · /memory on",
    "memory_disabled": "Память в этом боте отключена.",
    "memory_deleted": "Удалено.",
    "memory_not_found": "Этого факта уже нет.",
    "memory_notice": (
        "🧠 Я отметил несколько долговременных фактов из ваших слов, чтобы в следующий раз "
        "спрашивать меньше. /memory покажет их и позволит удалить; /memory off — не запоминать."
    ),
    "usage_report": "Ваш расход модели (дни по UTC):\nСегодня: {today}\nЗа месяц: {month}",
    "usage_line": "токенов на входе {prompt}, на выходе {completion}, {cost}",
    "usage_estimated": " (оценка)",
    "usage_unpriced": "; нет цены для модели {models}",
    "usage_unknown": "Не могу понять, кто отправил сообщение, поэтому расход показать нельзя.",
}

TABLES = {"en": EN, "ru": RU}


def t(language: str, key: str, **values: Any) -> str:
    """The string `key` in `language` (English when unknown), formatted with `values`."""
    table = TABLES.get(language, EN)
    return table.get(key, EN[key]).format(**values)


COMMANDS: tuple[tuple[str, str, str], ...] = (
    ("start", "Start and see how it works", "Начать и узнать, как это работает"),
    ("help", "Commands and how to use the bot", "Команды и как пользоваться ботом"),
    ("rounds", "Rounds per consultation: /rounds N", "Раундов в консультации: /rounds N"),
    ("answer", "Get the final answer now", "Получить итоговый ответ сейчас"),
    ("reset", "End the consultation and start over", "Завершить консультацию и начать заново"),
    ("status", "Where the consultation stands", "На каком этапе консультация"),
    ("retry", "Answer the last message again", "Ответить на последнее сообщение ещё раз"),
    ("role", "Choose the expert", "Выбрать эксперта"),
    ("model", "Choose the model", "Выбрать модель"),
    ("memory", "What I remember about you", "Что я о вас помню"),
    ("usage", "Your tokens and cost", "Ваши токены и стоимость"),
    ("forget", "Delete everything kept about you", "Удалить всё, что хранится о вас"),
    ("history", "Your recent consultations", "Ваши последние консультации"),
    (
        "export",
        "The consultation as DOCX and Markdown files",
        "Консультация файлами DOCX и Markdown",
    ),
)
