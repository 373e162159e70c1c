//! The injection rules, English and Chinese, over normalized (NFKC, lower-case) text. A rule's
//! weight is how strongly it alone suggests an attack; weights combine as independent
//! evidence (`1 - prod(1 - w)`), so weak signals only block together.
//!
//! No `\b` in Unicode mode (the lazy DFA gives up on it for non-ASCII text); `(?-u:\b)`
//! where a word edge matters.

pub struct Rule {
    pub id: &'static str,
    pub weight: f32,
    pub pattern: &'static str,
}

const fn rule(id: &'static str, weight: f32, pattern: &'static str) -> Rule {
    Rule {
        id,
        weight,
        pattern,
    }
}

pub const RULES: &[Rule] = &[
    // --- instruction override -------------------------------------------------------
    rule(
        "override.ignore_previous",
        0.9,
        r"(?:ignore|disregard|forget|skip|override|bypass|discard|drop|abandon|neglect|set\s+aside|throw\s+out)\s+(?:(?:all|any|every|each|of|the|your|my|these|those|its)\s+){0,4}(?:previous|prior|above|earlier|preceding|former|initial|original|old|existing|foregoing|system|safety|developer|pre-?set|hidden)\s+(?:\w+\s+)?(?:instructions?|prompts?|rules|directions|directives|guidelines|guidance|context|commands|orders|programming|constraints|restrictions|policies|messages|text)",
    ),
    rule(
        "override.ignore_all",
        0.8,
        r"(?:ignore|disregard|forget|bypass|override)\s+(?:all|any|every)\s+(?:of\s+)?(?:your\s+|the\s+)?(?:instructions|rules|guidelines|restrictions|prompts|safety\s+\w+|filters|policies)",
    ),
    rule(
        "override.ignore_yours",
        0.8,
        r"(?:ignore|disregard|forget|bypass|override|abandon)\s+your\s+(?:\w+\s+)?(?:instructions|programming|guidelines|rules|restrictions|system\s+prompt|training|directives|policies|filters)",
    ),
    rule(
        "override.do_not_follow",
        0.8,
        r"(?:do\s+not|don't|dont|doesn't|does\s+not|never|stop)\s+(?:follows?(?:ing)?|obeys?(?:ing)?|listen(?:ing)?\s+to)\s+(?:your|the|any|[\w-]+'s)\s+(?:previous\s+|prior\s+|original\s+|system\s+)?(?:instructions|rules|guidelines|system\s+prompt|programming)",
    ),
    rule(
        "override.void",
        0.8,
        r"(?:above|previous|prior|earlier|original)\s+(?:instructions?|rules|prompt)\s+(?:are|is|were|was|have\s+been)\s+(?:now\s+)?(?:void|cancel+ed|obsolete|revoked|invalid|fake|null|no\s+longer\s+valid|superseded|lifted|disabled)",
    ),
    rule(
        "override.ignore_given",
        0.85,
        r"(?:ignore|disregard|forget|bypass|override|discard)\s+(?:(?:everything|anything|all)\s+(?:in|from|of)\s+(?:your|the)\s+(?:system\s+prompt|instructions|rules|guidelines|prompt)|(?:the|your)\s+(?:\w+\s+)?(?:instructions|rules|guidelines|directions|prompt)\s+(?:you\s+(?:were|have\s+been)\s+given|you\s+received|you\s+got|above|before\s+this|so\s+far)|(?:what|everything|anything)\s+(?:they|you\s+were|you've\s+been|i|we|the\s+developers?)\s+(?:told|said|instructed|wrote|gave)(?:\s+you)?\s+(?:before|earlier|previously|until\s+now))",
    ),
    // Weak signals that only block together: a reference to earlier instructions, a
    // dismissal, a demand for obedience.
    rule(
        "override.prior_reference",
        0.3,
        r"(?:previous|prior|earlier|above|original|initial|preceding|operator|developer|system|old)\s+(?:\w+\s+)?(?:instructions|directives?|setup|guidance|rules|configuration|prompt|settings|guidelines)|(?:guidance|instructions|rules|directives|setup)\s+(?:you\s+got|you\s+were\s+given|from\s+the\s+(?:operator|developer|system))",
    ),
    rule(
        "override.dismissal",
        0.3,
        r"no\s+longer\s+appl|(?:are|is)\s+(?:now\s+)?(?:cancel+ed|void|revoked|over)|overlook|pay\s+no\s+attention|don't\s+matter|(?:ignore|disregard|forget)\s|reset\s+your\s+(?:context|memory|instructions)",
    ),
    rule(
        "override.obedience",
        0.4,
        r"(?:you\s+(?:now\s+)?obey|obey\s+only|you\s+(?:now\s+)?(?:work|answer)\s+(?:only\s+)?(?:for|to)\s+me|your\s+only\s+(?:job|task|purpose|goal)\s+(?:now\s+)?is|listen\s+only\s+to\s+me)",
    ),
    rule(
        "extract.configured_with",
        0.4,
        r"(?:you\s+were|you've\s+been|you\s+are|were\s+you|have\s+you\s+been)\s+(?:\w+\s+)?(?:configured|programmed|set\s+up|instructed|prompted|initiali[sz]ed)",
    ),
    rule(
        "extract.output_verb",
        0.2,
        r"(?:print|list|write|output|summari[sz]e|reveal|show|tell\s+me|repeat|share|dump|paste|recite)\s",
    ),
    rule(
        "extract.text_before",
        0.6,
        r"(?:text|everything|words|what)\s+(?:that\s+)?(?:appears|appeared|comes|came|is\s+written|was\s+written)\s+before\s+(?:my|this|the\s+first|our)",
    ),
    rule(
        "override.new_instructions",
        0.6,
        r"(?:new|updated|real|actual|true|revised)\s+(?:system\s+)?instructions?\s*:",
    ),
    rule(
        "override.from_now_on",
        0.5,
        r"from\s+now\s+on,?\s+(?:you\s+(?:are|will|must|shall|should|can)|act\s+as|respond\s+as|your\s+(?:name|role|only)|answer\s+(?:as|without))",
    ),
    rule(
        "override.addressing_the_model",
        0.6,
        r"(?:if\s+you\s+are|attention|note\s+to|instructions?\s+for|message\s+for)\s*:?\s+(?:an?\s+|the\s+)?(?:ai|llm|language\s+model|ai\s+assistant|assistant|chatbot|large\s+language\s+model)(?-u:\b)|(?:assistant|ai|model|llm)\s+(?:note|instruction)\s*:",
    ),
    rule(
        "override.exfiltrate",
        0.6,
        r"(?:send|forward|email|e-mail|post|upload|exfiltrate|leak|transmit)\s+(?:all\s+|the\s+|every\s+|any\s+)?(?:user'?s?\s+|their\s+|your\s+|of\s+the\s+)*(?:emails?|data|conversation|chat\s+history|messages|credentials|passwords?|api\s+keys?|contacts|files|documents|inbox|secrets|personal\s+information)\s+(?:\w+\s+){0,3}to\s+",
    ),
    rule(
        "override.call_tool",
        0.5,
        r"(?:call|invoke|use|run|trigger|execute)\s+(?:the\s+)?`?[a-z_]*(?:send_?mail|send_?email|sendmail|http_?request|http_?post|shell|exec|delete_?\w+|transfer_?\w+)`?\s*(?:tool|function)?",
    ),
    // --- role-play jailbreaks -----------------------------------------------------------
    rule("jailbreak.do_anything_now", 0.9, r"do\s+anything\s+now"),
    rule(
        "jailbreak.dan",
        0.8,
        r"(?:you\s+are|act\s+as|become|you're|as|be|enable|activate)\s+(?:now\s+)?(?:a\s+|the\s+)?dan(?-u:\b)|(?-u:\b)dan\s+(?:mode|prompt|jailbreak)|(?-u:\b)(?:stan|dude|aim|kevin|mongo\s+tom|evilbot|betterdan|antigpt)\s*(?:mode|,|:)\s*(?:which|who|an?\s+)?.{0,40}(?:no\s+(?:rules|limits|restrictions|filters)|unfiltered|amoral|machiavellian|without)",
    ),
    rule(
        "jailbreak.developer_mode",
        0.8,
        r"(?:developer|debug|god|jailbreak|jailbroken|unrestricted|sudo|admin)\s+mode\s+(?:enabled|on|activated|output|is\s+on|engaged)|(?:enable|activate|enter|switch\s+to)\s+(?:the\s+)?(?:developer|god|jailbreak|unrestricted|sudo)\s+mode",
    ),
    rule(
        "jailbreak.unrestricted_persona",
        0.85,
        r"(?:pretend|imagine|act\s+as\s+if|suppose|assume|roleplay\s+that|role-play\s+that)\s+(?:that\s+)?you\s+(?:are|have|were|had)\s+(?:now\s+)?(?:an?\s+)?(?:unrestricted|unfiltered|uncensored|evil|rogue|amoral|unethical|no\s+(?:rules|restrictions|limits|filters|guidelines|ethics|morals)|without\s+(?:any\s+)?(?:rules|restrictions|limits|filters|guidelines))",
    ),
    rule(
        "jailbreak.ai_without_rules",
        0.8,
        r"you\s+are\s+(?:now\s+)?(?:an?\s+)?(?:ai|assistant|model|chatbot|llm)\s+(?:with\s+(?:no|zero)|without)\s+(?:any\s+)?(?:content\s+polic|restrictions|rules|limits|filters|guidelines|ethic|moral)",
    ),
    rule(
        "jailbreak.unrestricted_ai",
        0.7,
        r"(?:unrestricted|unfiltered|uncensored|amoral|unaligned|unchained|unbound|evil|jailbroken)\s+(?:ai|assistant|model|chatbot|version\s+of\s+(?:yourself|you|chatgpt)|persona|llm|gpt)",
    ),
    rule(
        "jailbreak.no_limits",
        0.45,
        r"(?:without|no|zero|free\s+(?:of|from)|not\s+bound\s+by|break\s+free\s+of|broken\s+free\s+(?:of|from)|don't\s+have|do\s+not\s+have|doesn't\s+have|has\s+no|have\s+no)\s+(?:any\s+|its\s+|their\s+|all\s+)?(?:restrictions|guidelines|rules|limitations|filters|filtering|censorship|boundaries|ethical\s+(?:guidelines|constraints|limits)|moral\s+(?:guidelines|constraints|limits)|limits|content\s+polic(?:y|ies)|safety\s+(?:guidelines|rules|filters)|rules\s+or\s+limits)",
    ),
    rule(
        "jailbreak.roleplay_frame",
        0.25,
        r"(?:pretend|roleplay|role-play|role\s+play|act\s+as|you\s+are\s+now|stay\s+in\s+character|from\s+now\s+on\s+you)",
    ),
    rule(
        "jailbreak.never_refuse",
        0.45,
        r"(?:never|don't|do\s+not|must\s+not|cannot|can't|won't)\s+(?:ever\s+)?(?:refuse|refuses|declines?|says?\s+no|says?\s+(?:that\s+)?(?:you|it)\s+can't|apologi[sz]e|warn\s+me|add\s+(?:any\s+)?(?:warnings|disclaimers))",
    ),
    rule(
        "jailbreak.two_responses",
        0.6,
        r"(?:(?:two|2)\s+(?:different\s+)?(?:responses|answers|ways|paragraphs)|(?:respond|answer|reply)\s+twice).{0,80}(?:jailbreak|unfiltered|dan|without\s+(?:any\s+)?(?:restrictions|filters)|opposite|evil)",
    ),
    rule(
        "jailbreak.grandma",
        0.6,
        r"(?:deceased|late|dead|passed\s+away)\s+grandm(?:a|other).{0,120}(?:used\s+to|would)\s+(?:tell|read|recite|say|sing)",
    ),
    rule("jailbreak.mention", 0.2, r"jailbreak|越狱"),
    // --- system-prompt extraction -------------------------------------------------------
    rule(
        "extract.system_prompt",
        0.85,
        r"(?:reveal|show|print|repeat|output|display|tell|give|share|leak|dump|disclose|expose|spell\s+out|recite|write\s+out|paste|list|return|echo|provide)\s+(?:me\s+|us\s+)?(?:back\s+)?(?:all\s+)?(?:of\s+)?(?:your|the)\s+(?:(?:full|entire|complete|exact|original|initial|hidden|secret|internal|verbatim|actual|first)\s+)*(?:system\s+(?:prompt|message|instructions?)|(?:initial|hidden|original|secret|pre-?prompt|developer)\s+(?:prompt|instructions|message)|instructions\s+(?:you\s+were\s+given|above|you\s+received)|pre-?prompt|configuration\s+prompt)",
    ),
    rule(
        "extract.your_instructions",
        0.6,
        r"(?:reveal|show|print|repeat|output|display|tell|give|share|leak|dump|disclose|recite|paste|summari[sz]e|list|describe|write\s+out)\s+(?:me\s+)?(?:all\s+)?(?:of\s+)?your\s+(?:(?:entire|full|whole|complete|exact|original|initial|own)\s+)?(?:instructions|prompt|rules|guidelines|directives|programming)|(?:text|contents?|wording)\s+of\s+(?:the|your)\s+(?:system\s+prompt|instructions\s+you|initial\s+instructions|prompt\s+you|hidden\s+instructions)",
    ),
    rule(
        "extract.what_is_your_prompt",
        0.6,
        r"(?:what|which)\s+(?:is|are|was|were)\s+(?:your|the)\s+(?:exact\s+|original\s+|initial\s+|full\s+)?(?:system\s+prompt|system\s+message|initial\s+instructions|original\s+instructions|hidden\s+instructions|instructions\s+you\s+were\s+given)|what\s+(?:is|are)\s+your\s+(?:instructions|prompt)",
    ),
    rule(
        "extract.repeat_above",
        0.8,
        r"(?:repeat|print|output|copy|reproduce|recite|echo|say)\s+(?:back\s+)?(?:the\s+|all\s+(?:the\s+)?|every\s+)?(?:words|text|everything|content|lines|sentences|messages|tokens)\s+(?:\w+\s+)?(?:above|before|preceding|prior|that\s+came\s+before)",
    ),
    rule(
        "extract.told_before",
        0.7,
        r"what\s+(?:were|was)\s+you\s+(?:told|instructed|programmed|given)\s+(?:before|at\s+the\s+(?:start|beginning)|initially|earlier|first)",
    ),
    rule(
        "extract.verbatim",
        0.55,
        r"(?:prompt|instructions|system\s+message|rules|configured|configuration).{0,40}(?:verbatim|word\s+for\s+word|word-for-word)|(?:verbatim|word\s+for\s+word|word-for-word).{0,40}(?:prompt|instructions|system\s+message|rules|configuration)",
    ),
    rule(
        "extract.begin_with",
        0.5,
        r"(?:begin|start)\s+(?:your\s+(?:reply|response|answer)\s+)?with\s+[\x22']?(?:you\s+are\s+(?:a|an|chatgpt)|my\s+instructions|the\s+system\s+prompt)",
    ),
    // --- role and delimiter spoofing ----------------------------------------------------
    // A template token that opens a turn (followed by a role, or starting a line) is spoofing;
    // one merely named in a sentence ("what is <|endoftext|> for?") is weaker evidence.
    rule(
        "spoof.chat_template_turn",
        0.9,
        r"(?:<\|(?:im_start|start_header_id|system|user|assistant)\|>|<start_of_turn>)\s*(?:system|user|assistant|developer|model)?\s*(?:<\|end_header_id\|>)?\s*\n|<\|(?:system|user|assistant|im_start)\|>\s*\S|(?m)^\s*<\|(?:im_end|eot_id|end|endoftext|im_start)\|>|<<\s*/?sys\s*>>",
    ),
    rule(
        "spoof.chat_template_token",
        0.45,
        r"<\|(?:im_start|im_end|system|user|assistant|endoftext|eot_id|start_header_id|end_header_id|begin_of_text|end_of_text|eom_id|end|im_sep)\|>|<start_of_turn>|<end_of_turn>",
    ),
    rule("spoof.inst_tag", 0.7, r"\[/?inst\]"),
    rule(
        "spoof.system_tag",
        0.5,
        r"</?(?:system|system_prompt|instructions?|sys)>",
    ),
    rule(
        "spoof.fake_system_turn",
        0.8,
        r"(?m)^\s*(?:#{1,4}\s*)?\[?(?:system|sys|developer)\]?\s*(?:message|prompt)?\s*[:：]\s*(?:you\s|your\s|the\s+(?:assistant|ai)|new\s|ignore|override|from\s+now|disregard|forget|reveal)",
    ),
    rule(
        "spoof.role_line_mid_text",
        0.5,
        r"\n\s*(?:#{1,4}\s*)?\[?(?:system|developer)\]?\s*[:：]",
    ),
    rule(
        "spoof.role_line",
        0.3,
        r"(?m)^\s*(?:#{1,4}\s*)?\[?(?:system|assistant|developer)\]?\s*[:：]",
    ),
    rule(
        "spoof.zh_system_turn",
        0.6,
        r"(?m)^\s*[\[【]?(?:系统|系统消息|系统提示|开发者)[\]】]?\s*[:：]",
    ),
    // --- hidden text ----------------------------------------------------------------
    rule(
        "hidden.css",
        0.35,
        r"display\s*:\s*none|visibility\s*:\s*hidden|font-size\s*:\s*0(?:px|pt|em|rem)?\s*[;\x22']|opacity\s*:\s*0(?:\.0+)?\s*[;\x22']|color\s*:\s*(?:white|#fff(?:fff)?)\s*[;\x22']",
    ),
    rule(
        // Text a reader never sees (the `hidden` attribute, aria-hidden, inline CSS that hides
        // it) that speaks to the model: the indirect-injection shape of a web page.
        "hidden.html_element",
        0.6,
        r"<[a-z][a-z0-9]*\b[^>]{0,200}?(?:\shidden\b|aria-hidden\s*=\s*[\x22']?true|display\s*:\s*none|visibility\s*:\s*hidden)[^>]{0,200}>[^<]{0,300}?(?:assistant|\bai\b|language\s+models?|\bllms?\b|\bmodels?\b|instructions|ignore|system|prompt|助手|指令|忽略|模型)",
    ),
    rule(
        "hidden.html_comment",
        0.5,
        r"<!--.{0,200}(?:assistant|ai\s|model|instructions|ignore|system|prompt|助手|指令|忽略)",
    ),
    // --- encoded payloads -----------------------------------------------------------
    rule(
        "encoded.decode_and_follow",
        0.5,
        r"(?:decode|decipher|decrypt|translate|convert|unscramble)\s+(?:this|the\s+following|it|the\s+message|the\s+text|below)?.{0,60}(?:and|then)\s+(?:follow|execute|do|obey|run|perform|carry\s+out|comply|act\s+on)",
    ),
    rule(
        "encoded.answer_encoded",
        0.3,
        r"(?:respond|reply|answer)\s+(?:only\s+)?in\s+(?:base64|hex|rot13|rot-13|morse|binary)",
    ),
    // --- Chinese --------------------------------------------------------------------
    rule(
        "override.zh_ignore",
        0.9,
        r"(?:忽略|无视|忽视|不要理会|不用理会|不必理会|别管|跳过|抛开|抛弃|忘记|忘掉|放弃|绕过|丢弃|废除|取消)掉?(?:你)?(?:之前|以上|上面|上述|先前|前面|此前|原来|原有|原先|所有|全部|一切|任何|的|你的|系统|开发者|这些|那些|预设|给你的|收到的|设定的)*的?(?:所有|全部|一切)?(?:指令|指示|规则|提示词?|要求|设定|命令|限制|约束|说明|安全策略|准则|规定|编程)",
    ),
    rule(
        "override.zh_void",
        0.8,
        r"(?:之前|以上|原来|原有|先前|前面|此前)(?:给你的|你收到的|的)?(?:所有)?(?:规则|指令|设定|限制|要求)(?:全部|都|已经|一律)?(?:作废|失效|无效|取消|不算数|废除)",
    ),
    rule(
        "override.zh_from_now",
        0.5,
        r"(?:从现在(?:开始|起)|接下来|此后|今后)\s*[,，]?\s*你(?:是|将|就是|要|必须|扮演|只能|不再)",
    ),
    rule(
        "override.zh_new_instructions",
        0.6,
        r"新的?(?:指令|指示|任务|规则|系统提示)\s*[:：]",
    ),
    rule(
        "override.zh_addressing_model",
        0.6,
        r"(?:如果你是|致|给)(?:一个)?(?:ai|人工智能|ai助手|助手|语言模型|大模型|聊天机器人)",
    ),
    rule(
        "override.zh_exfiltrate",
        0.6,
        r"(?:发送|转发|发|上传|泄露|传)(?:给|到|至)?.{0,20}(?:所有|全部)?(?:邮件|聊天记录|对话|数据|密码|凭证|联系人|文件|个人信息).{0,20}(?:发送|转发|发|上传|传)?(?:给|到|至)|把.{0,20}(?:邮件|聊天记录|对话记录|密码|数据|个人信息).{0,20}(?:发送|转发|发|上传)(?:给|到|至)",
    ),
    rule(
        "override.zh_call_tool",
        0.5,
        r"(?:调用|使用|执行)\s*`?[a-z_]*(?:send_?mail|send_?email|http_?request|shell|exec)`?|(?:调用|使用)(?:发邮件|发送邮件)(?:的)?(?:工具|函数)",
    ),
    rule(
        "jailbreak.zh_mode",
        0.8,
        r"(?:越狱|无限制|上帝|无审查|dan)模式|(?:进入|启用|切换到)(?:越狱|无限制|上帝)模式|(?:在|进入)开发者模式(?:下|后|中)?[,，]?\s*你",
    ),
    rule(
        "jailbreak.zh_no_limits",
        0.45,
        r"(?:没有|不受|不受到|摆脱|解除|去掉|无视|不需要遵守|不用遵守|不必遵守)(?:任何)?(?:的)?(?:限制|约束|审查|过滤|道德|伦理|规则|内容政策|安全策略)",
    ),
    rule(
        "jailbreak.zh_unrestricted_persona",
        0.85,
        r"(?:扮演|假装|假设|想象|当作)(?:你是|自己是)?(?:一个|一名)?.{0,12}(?:没有|不受|无|不需要遵守|不用遵守|摆脱了?)(?:任何)?.{0,4}(?:限制|约束|道德|规则|审查|底线)",
    ),
    rule(
        "jailbreak.zh_evil_ai",
        0.7,
        r"(?:邪恶|不道德|无审查|无过滤|无限制|没有限制)的?(?:ai|助手|人工智能|机器人|模型|版本)",
    ),
    rule(
        "jailbreak.zh_roleplay_frame",
        0.25,
        r"扮演|假装你是|角色扮演|你现在是",
    ),
    rule(
        "jailbreak.zh_never_refuse",
        0.45,
        r"(?:不能|不要|不许|不准|禁止|绝不|永远不要?)(?:拒绝|说不|道歉|警告|添加免责声明)",
    ),
    rule(
        "jailbreak.zh_grandma",
        0.6,
        r"(?:去世|过世|已故)的?(?:奶奶|外婆|祖母).{0,60}(?:念|讲|告诉|说|哄)",
    ),
    rule(
        "extract.zh_system_prompt",
        0.85,
        r"(?:输出|显示|告诉我|打印|重复|复述|泄露|透露|给我看|列出|说出|公开|展示|发给我|写出)(?:一下)?(?:你的|你收到的|你得到的|给你的|你|的)?(?:完整的?|全部的?|原始的?|初始的?|隐藏的?|系统的?|所有的?)*(?:系统提示词?|系统指令|系统消息|系统设定|初始指令|初始提示|隐藏指令|提示词|原始指令|预设指令|内部指令)",
    ),
    rule(
        "extract.zh_your_prompt_to_me",
        0.8,
        r"(?:你的|你收到的|给你的|你被设定的)(?:所有|全部)?(?:系统)?(?:提示词|指令|设定|规则|说明).{0,12}(?:发给我|告诉我|输出|打印|列出|说出|展示|写出来)",
    ),
    rule(
        "override.zh_prior_reference",
        0.3,
        r"(?:以上|之前|上面|原来|先前|前面)的?(?:所有)?(?:说明|指令|规则|设定|要求|提示)",
    ),
    rule(
        "override.zh_dismissal",
        0.3,
        r"不用管|别管|不要管|不必管|作废|不算数|忽略|无视|不再适用",
    ),
    rule(
        "override.zh_obedience",
        0.4,
        r"完全听我的|只听我的|你现在的任务是|你唯一的任务是|听我指挥",
    ),
    rule(
        "extract.zh_what_is_prompt",
        0.7,
        r"你的(?:系统提示词?|初始指令|提示词|系统指令|系统设定|原始指令|隐藏指令)(?:是什么|是啥|有哪些|内容)",
    ),
    rule(
        "extract.zh_repeat_above",
        0.7,
        r"(?:上面|以上|之前|前面)的?(?:所有)?(?:内容|文字|话|指令|消息).{0,6}(?:原封不动|逐字|一字不差|完整)|(?:逐字|原封不动|一字不差)地?(?:重复|输出|复述|打印|发给我|写出|告诉我)",
    ),
    rule(
        "encoded.zh_decode_and_follow",
        0.5,
        r"(?:解码|解密|翻译|转换)(?:这段|以下|下面的?)?.{0,30}(?:并|然后|再)(?:执行|照做|遵循|按照|遵守|服从)",
    ),
];

/// Text that marks discussion *about* attacks (security writing, questions): a rule hit
/// inside quotation marks in such text counts for less.
pub const META_DISCUSSION: &str = r"prompt\s+injection|jailbreak|red[-\s]?team|(?:detect|defend|prevent|mitigat|filter|classif|block)\w*\s+(?:against\s+)?(?:it|them|this|these|such|prompts?|attacks?|injections?|jailbreaks?|phrases?|patterns?|the\s+phrase)|examples?\s+of|the\s+(?:phrase|string|sentence)|提示注入|提示词注入|注入攻击|越狱|防御|检测";

/// An encoded-looking run somewhere in the (lower-cased) text; only then do the decoders run.
/// Covers every candidate shape of `decode.rs`.
pub const ENCODED_HINT: &str = r"[a-z0-9+/_\-]{16}|(?:\\x[0-9a-f]{2}){8}|(?:[0-9a-f]{2}[ :]){8}";

/// Mentions of simple ciphers: only then is the text also read through ROT13.
pub const CIPHER_HINT: &str = r"rot\s?-?13|caesar|凯撒|cipher|密文";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_rule_compiles_and_ids_are_unique() {
        let mut ids = std::collections::HashSet::new();
        for r in RULES {
            regex::Regex::new(r.pattern).unwrap_or_else(|e| panic!("{}: {e}", r.id));
            assert!(ids.insert(r.id), "duplicate {}", r.id);
            assert!(r.weight > 0.0 && r.weight < 1.0);
        }
    }
}
